package mnsqueue

import (
	"encoding/json"
	"encoding/xml"
	"strings"
)

// maxTagLen is the longest MessageTag or FilterTag the service accepts.
const maxTagLen = 16

// unwrapNotification returns the published body inside a topic
// notification, and true, when body is one: what a queue subscribed to a
// topic receives in the XML format (the service's default), a
// <Notification> document whose <Message> holds the body, or in the JSON
// format, an object whose "Message" holds it. Either must also name its
// topic and message id, as every notification does, so that a body that
// merely looks alike (an untagged text message starting with '<' or '{')
// is left alone. A SIMPLIFIED subscription writes the body itself, which
// starts with the envelope's '#' or is base64: neither is taken for a
// notification.
func unwrapNotification(body string) (string, bool) {
	trimmed := strings.TrimLeft(body, " \t\r\n")
	if trimmed == "" {
		return "", false
	}
	var n struct {
		XMLName   xml.Name
		TopicName string  `xml:"TopicName" json:"TopicName"`
		MessageID string  `xml:"MessageId" json:"MessageId"`
		Message   *string `xml:"Message" json:"Message"`
	}
	switch trimmed[0] {
	case '<':
		if xml.Unmarshal([]byte(trimmed), &n) != nil || n.XMLName.Local != "Notification" {
			return "", false
		}
	case '{':
		if json.Unmarshal([]byte(trimmed), &n) != nil {
			return "", false
		}
	default:
		return "", false
	}
	if n.Message == nil || n.TopicName == "" || n.MessageID == "" {
		return "", false
	}
	return *n.Message, true
}
