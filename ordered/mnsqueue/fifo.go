package mnsqueue

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"

	ali_mns "github.com/aliyun/aliyun-mns-go-sdk"

	"github.com/inorder/inorder/ordered/driver"
)

// Queue types, as the service names them (QueueType of CreateQueue and
// GetQueueAttributes).
const (
	QueueTypeNormal = "normal"
	QueueTypeFIFO   = "fifo"
)

// MaxGroupLen is the longest message group the driver sends as a FIFO
// queue's MessageGroupId, in bytes.
const MaxGroupLen = 128

var _ driver.Grouped = (*Queue)(nil)

// Grouped implements driver.Grouped: it reports whether the queue is a
// FIFO queue, whose service keeps each message group's order itself and
// requires every message's group.
func (q *Queue) Grouped() bool { return q.fifo }

// SendGroups implements driver.Grouped: SendBatch with groups[i], sent as
// the MessageGroupId of bodies[i]. The Go SDK v1.0.11 has no field for it,
// so the request goes through the SDK's client (signed as usual) with the
// driver's own XML. A group that is empty, longer than MaxGroupLen bytes or
// not XML text fails with driver.ErrInvalidGroup before anything is sent.
func (q *Queue) SendGroups(ctx context.Context, bodies [][]byte, groups []string) error {
	const op = "SendGroups"
	if len(groups) != len(bodies) {
		return fmt.Errorf("mnsqueue: %s: %d groups for %d bodies", op, len(groups), len(bodies))
	}
	for i, g := range groups {
		if err := checkGroup(g); err != nil {
			return fmt.Errorf("mnsqueue: %s: body %d: %w", op, i, err)
		}
	}
	return q.send(ctx, op, bodies, groups)
}

// CheckGroup implements driver.Grouped: a group must be 1 to MaxGroupLen
// bytes of UTF-8 text that XML allows to be sent as a MessageGroupId.
func (q *Queue) CheckGroup(group string) error { return checkGroup(group) }

// checkGroup reports whether g can be sent as a MessageGroupId.
func checkGroup(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("%w: a FIFO queue's message group must not be empty", driver.ErrInvalidGroup)
	case len(g) > MaxGroupLen:
		return fmt.Errorf("%w: a FIFO queue's message group must be at most %d bytes, got %d", driver.ErrInvalidGroup, MaxGroupLen, len(g))
	case !validXMLText([]byte(g)):
		return fmt.Errorf("%w: a FIFO queue's message group must be UTF-8 text that XML allows, got %q", driver.ErrInvalidGroup, g)
	}
	return nil
}

// fifoMessage is one entry of a BatchSendMessage to a FIFO queue: the
// SDK's MessageSendRequest and a MessageGroupId after its fields, as the
// official Java SDK writes it.
type fifoMessage struct {
	XMLName        xml.Name `xml:"Message"`
	MessageBody    string   `xml:"MessageBody"`
	DelaySeconds   int64    `xml:"DelaySeconds"`
	Priority       int64    `xml:"Priority"`
	MessageGroupID string   `xml:"MessageGroupId"`
}

type fifoBatch struct {
	XMLName  xml.Name      `xml:"Messages"`
	Messages []fifoMessage `xml:"Message"`
}

// sendFIFO sends reqs with groups through the SDK's client and decodes the
// answer as the SDK's BatchSendMessage does.
func (q *Queue) sendFIFO(reqs []ali_mns.MessageSendRequest, groups []string) (ali_mns.BatchMessageSendResponse, error) {
	b := fifoBatch{Messages: make([]fifoMessage, len(reqs))}
	for i, r := range reqs {
		b.Messages[i] = fifoMessage{MessageBody: r.MessageBody, Priority: r.Priority, MessageGroupID: groups[i]}
	}
	var resp ali_mns.BatchMessageSendResponse
	err := rawSend(q.client, ali_mns.NewBatchOpDecoder(&resp), ali_mns.POST, b, "queues/"+q.name+"/messages", &resp)
	return resp, err
}

// fifoReceived is a ReceiveMessage answer of a FIFO queue: the SDK's
// MessageReceiveResponse has no MessageGroupId.
type fifoReceived struct {
	XMLName  xml.Name `xml:"Messages"`
	Messages []struct {
		MessageID        string `xml:"MessageId"`
		ReceiptHandle    string `xml:"ReceiptHandle"`
		MessageBody      string `xml:"MessageBody"`
		EnqueueTime      int64  `xml:"EnqueueTime"`
		NextVisibleTime  int64  `xml:"NextVisibleTime"`
		FirstDequeueTime int64  `xml:"FirstDequeueTime"`
		DequeueCount     int64  `xml:"DequeueCount"`
		Priority         int64  `xml:"Priority"`
		MessageGroupID   string `xml:"MessageGroupId"`
	} `xml:"Message"`
}

// receiveFIFO is ReceiveBatch on a FIFO queue: the request the SDK's
// BatchReceiveMessage makes, through its client, with an answer decoded
// with each message's MessageGroupId.
func (q *Queue) receiveFIFO(ctx context.Context, maxN int, ws []int64) ([]*driver.Message, error) {
	const op = "ReceiveBatch"
	resource := fmt.Sprintf("queues/%s/messages?numOfMessages=%d", q.name, maxN)
	if len(ws) > 0 && ws[0] > 0 {
		resource += fmt.Sprintf("&waitseconds=%d", ws[0])
	}
	r, err := run(q.session, ctx, op, func() result[fifoReceived] {
		var resp fifoReceived
		err := rawSend(q.client, ali_mns.NewAliMNSDecoder(), ali_mns.GET, nil, resource, &resp)
		return result[fifoReceived]{resp, err}
	}, func(r result[fifoReceived]) {
		if r.err == nil {
			for _, m := range r.v.Messages {
				q.releaseOne(m.MessageID, m.ReceiptHandle)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		if sdkCode(r.err) == sdkMessageNotExist {
			return nil, nil // nothing came within the wait
		}
		return nil, q.sdkError(op, opOther, r.err)
	}
	msgs := make([]*driver.Message, len(r.v.Messages))
	for i, m := range r.v.Messages {
		msgs[i] = q.message(&ali_mns.MessageReceiveResponse{
			MessageId: m.MessageID, ReceiptHandle: m.ReceiptHandle, MessageBody: m.MessageBody,
			EnqueueTime: m.EnqueueTime, NextVisibleTime: m.NextVisibleTime, FirstDequeueTime: m.FirstDequeueTime,
			DequeueCount: m.DequeueCount, Priority: m.Priority,
		}, m.MessageGroupID)
	}
	return msgs, nil
}

// queueAttributes is what New reads of a queue: the SDK's QueueAttribute
// lacks QueueType.
type queueAttributes struct {
	XMLName            xml.Name `xml:"Queue"`
	MaxMessageSize     int32    `xml:"MaximumMessageSize"`
	VisibilityTimeout  int32    `xml:"VisibilityTimeout"`
	PollingWaitSeconds int32    `xml:"PollingWaitSeconds"`
	QueueType          string   `xml:"QueueType"`
}

// readAttributes reads the queue's attributes.
func (q *Queue) readAttributes(ctx context.Context) (queueAttributes, error) {
	const op = "GetQueueAttributes"
	r, err := run(q.session, ctx, op, func() result[queueAttributes] {
		var a queueAttributes
		err := rawSend(q.client, ali_mns.NewAliMNSDecoder(), ali_mns.GET, nil, "queues/"+q.name, &a)
		return result[queueAttributes]{a, err}
	}, nil)
	if err == nil && r.err != nil {
		err = classify(op, opOther, r.err)
	}
	return r.v, err
}

// rawSend is the SDK's own request path for a body the SDK's types cannot
// express: the client signs and sends message (XML-marshalled, or nil),
// and an answer other than 200, 201 or 204 is decoded into the SDK's error
// by decoder, as the SDK does; a success is decoded into v.
func rawSend(client ali_mns.MNSClient, decoder ali_mns.MNSDecoder, method ali_mns.Method, message any, resource string, v any) error {
	resp, err := client.Send(method, nil, message, resource)
	if err != nil || resp == nil {
		return err
	}
	switch resp.Header.StatusCode() {
	case 200, 201, 204:
	default:
		body := resp.Body()
		derr, err := decoder.DecodeError(body, resource)
		if err != nil {
			return rawError{sdkBadErrorResponse, fmt.Sprintf("undecodable error answer (status %d): %.200q", resp.Header.StatusCode(), body)}
		}
		return derr
	}
	if v == nil || len(resp.Body()) == 0 {
		return nil
	}
	if err := decoder.Decode(bytes.NewReader(resp.Body()), v); err != nil {
		return rawError{sdkBadResponse, "undecodable answer: " + err.Error()}
	}
	return nil
}

// rawError is an error of rawSend's own, coded as the SDK codes its own
// (see sdkCode), so that classify treats both alike.
type rawError struct {
	code uint64
	msg  string
}

func (e rawError) Error() string     { return fmt.Sprintf("mnsqueue: MNS#%d: %s", e.code, e.msg) }
func (e rawError) Code() uint64      { return e.code }
func (e rawError) Namespace() string { return "MNS" }

// encodeBody is a body as the driver sends it: base64, or as it is in raw
// mode (which then must be XML text).
func (q *Queue) encodeBody(b []byte) (string, error) {
	if q.opts.Raw {
		if !validXMLText(b) {
			return "", ErrInvalidBody
		}
		return string(b), nil
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// queueTypeOf returns the service's queue type, normal when it says none.
func queueTypeOf(a queueAttributes) string {
	if a.QueueType == "" {
		return QueueTypeNormal
	}
	return a.QueueType
}
