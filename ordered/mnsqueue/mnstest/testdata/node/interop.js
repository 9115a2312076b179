// Drives the emulator with the official MNS Node.js SDK (@alicloud/mns),
// which puts receipt handles in query strings without escaping them. Run by
// node_interop_test.go; prints one JSON line with what it did.
'use strict';

const MNS = require('@alicloud/mns');

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

async function main() {
  const client = new MNS(env('MNS_ACCOUNT_ID'), {
    endpoint: env('MNS_ENDPOINT'),
    accessKeyId: env('MNS_ACCESS_KEY_ID'),
    accessKeySecret: env('MNS_ACCESS_KEY_SECRET'),
  });
  const queue = env('MNS_QUEUE');
  const want = Number(env('MNS_COUNT'));
  const out = { received: 0, deleted: 0, changed: 0, batchDeleted: 0, handles: [], bodies: [], sent: 0, published: 0 };

  // Receive what the Go sender sent; delete every other message with
  // DeleteMessage, and the rest after a ChangeMessageVisibility with
  // BatchDeleteMessage: both put the handle in the query string as it is.
  let batch = [];
  while (out.received < want) {
    const res = await client.batchReceiveMessage(queue, 16, 1);
    for (const m of [].concat(res.body)) {
      out.received++;
      out.bodies.push(m.MessageBody);
      out.handles.push(m.ReceiptHandle);
      if (out.received % 2 === 0) {
        await client.deleteMessage(queue, m.ReceiptHandle);
        out.deleted++;
      } else {
        const cv = await client.changeMessageVisibility(queue, m.ReceiptHandle, 30);
        out.changed++;
        batch.push(cv.body.ReceiptHandle);
      }
    }
    if (batch.length >= 8) {
      await client.batchDeleteMessage(queue, batch);
      out.batchDeleted += batch.length;
      batch = [];
    }
  }
  if (batch.length > 0) {
    await client.batchDeleteMessage(queue, batch);
    out.batchDeleted += batch.length;
  }

  // The queue is now empty: a receive is an error the SDK must read (it
  // names it 'MNS' + <Code> + 'Error', whatever the <Error> namespace).
  try {
    await client.receiveMessage(queue, 1);
    out.emptyError = 'none';
  } catch (err) {
    out.emptyError = err.name;
  }

  // Send back, and publish to the topic.
  const back = env('MNS_QUEUE_BACK');
  for (let i = 0; i < 4; i++) {
    const msgs = [];
    for (let j = 0; j < 4; j++) msgs.push({ MessageBody: `node-${i * 4 + j}`, Priority: 8 });
    await client.batchSendMessage(back, msgs);
    out.sent += msgs.length;
  }
  const topic = env('MNS_TOPIC');
  for (let i = 0; i < 3; i++) {
    await client.publishMessage(topic, { MessageBody: `#${i + 1}#from node`, MessageTag: 'node' });
    out.published++;
  }
  const attrs = await client.getTopicAttributes(topic);
  out.topicName = attrs.body.TopicName;
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.name}: ${err.message}\n`);
  process.exit(1);
});
