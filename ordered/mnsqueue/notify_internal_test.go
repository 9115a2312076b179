package mnsqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnwrapNotification: XML and JSON notifications give up the published
// body; everything else, look-alikes included, is left alone.
func TestUnwrapNotification(t *testing.T) {
	xmlN := `<?xml version="1.0" encoding="UTF-8"?>
<Notification xmlns="http://mns.aliyuncs.com/doc/v1/">
  <TopicOwner>1</TopicOwner>
  <TopicName>orders</TopicName>
  <Subscriber>1</Subscriber>
  <SubscriptionName>s</SubscriptionName>
  <MessageId>ABC</MessageId>
  <MessageMD5>X</MessageMD5>
  <Message>#17#a&lt;b&amp;c&#xA;</Message>
  <PublishTime>1</PublishTime>
</Notification>`
	for _, tc := range []struct {
		name, body, want string
		ok               bool
	}{
		{"XML", xmlN, "#17#a<b&c\n", true},
		{"XML, CDATA", `<Notification><TopicName>t</TopicName><MessageId>1</MessageId><Message><![CDATA[#1#<x>]]></Message></Notification>`, "#1#<x>", true},
		{"XML, leading whitespace", "\n " + xmlN, "#17#a<b&c\n", true},
		{"XML, empty message", `<Notification><TopicName>t</TopicName><MessageId>1</MessageId><Message></Message></Notification>`, "", true},
		{"JSON", `{"TopicOwner":"1","TopicName":"orders","Subscriber":"1","SubscriptionName":"s","MessageId":"ABC","Message":"#17#a<b&c\n","MessageMD5":"X","PublishTime":"1"}`, "#17#a<b&c\n", true},
		{"JSON, base64 inside", `{"TopicName":"t","MessageId":"1","Message":"IzEjeA=="}`, "IzEjeA==", true},
		{"SIMPLIFIED envelope", "#17#payload", "", false},
		{"SIMPLIFIED base64", "IzE3I3BheWxvYWQ=", "", false},
		{"other XML", `<Order><Message>x</Message></Order>`, "", false},
		{"XML without a message", `<Notification><TopicName>t</TopicName><MessageId>1</MessageId></Notification>`, "", false},
		{"XML without a topic", `<Notification><MessageId>1</MessageId><Message>x</Message></Notification>`, "", false},
		{"broken XML", `<Notification><TopicName>t`, "", false},
		{"other JSON", `{"Message":"x","id":1}`, "", false},
		{"JSON with a number message", `{"TopicName":"t","MessageId":"1","Message":5}`, "", false},
		{"broken JSON", `{"TopicName":`, "", false},
		{"empty", "", "", false},
	} {
		got, ok := unwrapNotification(tc.body)
		assert.Equal(t, tc.ok, ok, "%s: unwrapped?", tc.name)
		assert.Equal(t, tc.want, got, "%s: body", tc.name)
	}
}
