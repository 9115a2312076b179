package mnstest

import (
	"encoding/xml"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Request bodies. The tags carry no namespace so that bodies in any
// namespace or none decode alike (the Go SDK writes none, the Python and
// Node.js SDKs xmlns="http://mns.aliyuncs.com/doc/v1/", the Java SDK
// xmlns="http://mns.aliyuncs.com/doc/v1"); numbers are read as text so that
// a bad number is InvalidArgument, not MalformedXML.

// sendBody is either a <Message> (single send) or a <Messages> (batch).
type sendBody struct {
	XMLName xml.Name
	sendEntry
	Messages []sendEntry `xml:"Message"`
}

// sendEntry is one message to send. MessageGroupId follows MessageBody,
// DelaySeconds, Priority and the property lists, as the Java SDK writes
// it; the Go SDK v1.0.11 never sends it.
type sendEntry struct {
	MessageBody    *string `xml:"MessageBody"`
	DelaySeconds   string  `xml:"DelaySeconds"`
	Priority       string  `xml:"Priority"`
	MessageGroupID *string `xml:"MessageGroupId"`
}

type handlesBody struct {
	XMLName xml.Name
	Handles []string `xml:"ReceiptHandle"`
}

type queueBody struct {
	XMLName                xml.Name
	DelaySeconds           *string `xml:"DelaySeconds"`
	MaximumMessageSize     *string `xml:"MaximumMessageSize"`
	MessageRetentionPeriod *string `xml:"MessageRetentionPeriod"`
	VisibilityTimeout      *string `xml:"VisibilityTimeout"`
	PollingWaitSeconds     *string `xml:"PollingWaitSeconds"`
	LoggingEnabled         *string `xml:"LoggingEnabled"`
	QueueType              *string `xml:"QueueType"`
	DlqPolicy              *struct {
		Enabled               string `xml:"Enabled"`
		DeadLetterTargetQueue string `xml:"DeadLetterTargetQueue"`
		MaxReceiveCount       string `xml:"MaxReceiveCount"`
	} `xml:"DlqPolicy"`
}

// apply overrides the attributes present in the body.
func (b *queueBody) apply(a *QueueAttributes) *apiError {
	fields := []struct {
		name string
		v    *string
		dst  *int
	}{
		{"DelaySeconds", b.DelaySeconds, &a.DelaySeconds},
		{"MaximumMessageSize", b.MaximumMessageSize, &a.MaximumMessageSize},
		{"MessageRetentionPeriod", b.MessageRetentionPeriod, &a.MessageRetentionPeriod},
		{"VisibilityTimeout", b.VisibilityTimeout, &a.VisibilityTimeout},
		{"PollingWaitSeconds", b.PollingWaitSeconds, &a.PollingWaitSeconds},
	}
	for _, f := range fields {
		if f.v == nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(*f.v))
		if err != nil {
			return invalidArgument("The value of " + f.name + " is not a valid integer.")
		}
		*f.dst = n
	}
	if b.LoggingEnabled != nil {
		v, err := strconv.ParseBool(strings.TrimSpace(*b.LoggingEnabled))
		if err != nil {
			return invalidArgument("The value of LoggingEnabled is not a valid boolean.")
		}
		a.LoggingEnabled = v
	}
	if b.QueueType != nil {
		a.QueueType = strings.TrimSpace(*b.QueueType)
		if a.QueueType == QueueTypeNormal {
			a.QueueType = "" // as withDefaults has it
		}
	}
	if p := b.DlqPolicy; p != nil {
		on, err := strconv.ParseBool(strings.TrimSpace(p.Enabled))
		if err != nil {
			return invalidArgument("The value of DlqPolicy.Enabled is not a valid boolean.")
		}
		a.DeadLetterQueue, a.MaxReceiveCount = "", 0
		if on {
			n, err := strconv.Atoi(strings.TrimSpace(p.MaxReceiveCount))
			if err != nil {
				return invalidArgument("The value of DlqPolicy.MaxReceiveCount is not a valid integer.")
			}
			a.DeadLetterQueue, a.MaxReceiveCount = strings.TrimSpace(p.DeadLetterTargetQueue), n
		}
	}
	return nil
}

// parseOptInt reads an optional integer element: empty means absent (-1).
func parseOptInt(s, element string) (int64, *apiError) {
	s = strings.TrimSpace(s)
	if s == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalidArgument("The value of " + element + " is not a valid integer.")
	}
	return n, nil
}

// Response building. Bodies are written by hand: it is several times faster
// than xml.Marshal and the shapes are fixed.

const (
	xmlHeader = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	xmlNS     = ` xmlns="http://mns.aliyuncs.com/doc/v1/"`
	// xmlErrorNS is the namespace of an <Error> answer: without the
	// trailing slash of xmlNS. The Java SDK 2.0.0 reads errors with JAXB
	// over a namespace-aware parser in exactly this namespace
	// (src/main/java/com/aliyun/mns/model/ErrorMessage.java,
	// common/MNSConstants.java DEFAULT_XML_NAMESPACE), so the service must
	// send it; any other form is a parse failure there, and an empty
	// receive throws instead of returning null. The Go SDK v1.0.11 (struct
	// tags without a namespace), the Python SDK (minidom
	// getElementsByTagName) and the Node.js SDK (xml2js by tag name)
	// ignore the namespace. Success bodies keep xmlNS, the documentation's
	// form, which every SDK reads by local name.
	xmlErrorNS = ` xmlns="http://mns.aliyuncs.com/doc/v1"`
)

func appendElem(b []byte, name, value string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = appendEscaped(b, value)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func appendIntElem(b []byte, name string, v int64) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendInt(b, v, 10)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// appendEscaped escapes s as encoding/xml.EscapeText does, replacing
// characters XML cannot carry with U+FFFD.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		var esc string
		width := 1
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				esc = "&#34;"
			case '\'':
				esc = "&#39;"
			case '&':
				esc = "&amp;"
			case '<':
				esc = "&lt;"
			case '>':
				esc = "&gt;"
			case '\t':
				esc = "&#x9;"
			case '\n':
				esc = "&#xA;"
			case '\r':
				esc = "&#xD;"
			default:
				if c < 0x20 {
					esc = "\uFFFD"
				}
			}
		} else {
			r, w := utf8.DecodeRuneInString(s[i:])
			width = w
			if r == utf8.RuneError && w == 1 || !inXMLRange(r) {
				esc = "\uFFFD"
			}
		}
		if esc != "" {
			b = append(b, s[last:i]...)
			b = append(b, esc...)
			last = i + width
		}
		i += width
	}
	return append(b, s[last:]...)
}

func inXMLRange(r rune) bool {
	return r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

func ms(ns int64) int64 { return ns / millisecond }

func appendMessage(b []byte, d *delivery, ns bool) []byte {
	b = append(b, "<Message"...)
	if ns {
		b = append(b, xmlNS...)
	}
	b = append(b, '>')
	b = appendElem(b, "MessageId", d.id)
	if d.handle != "" {
		b = appendElem(b, "ReceiptHandle", d.handle)
	}
	b = appendElem(b, "MessageBodyMD5", d.md5)
	b = appendElem(b, "MessageBody", d.body)
	b = appendIntElem(b, "EnqueueTime", ms(d.enqueued))
	if d.handle != "" {
		b = appendIntElem(b, "NextVisibleTime", ms(d.visible))
	}
	b = appendIntElem(b, "FirstDequeueTime", ms(d.firstDeq))
	b = appendIntElem(b, "DequeueCount", d.dequeues)
	b = appendIntElem(b, "Priority", int64(d.priority))
	if d.group != nil {
		b = appendElem(b, "MessageGroupId", *d.group)
	}
	return append(b, "</Message>"...)
}

// appendQueueAttrs writes a <Queue> with the attributes of info, and first
// its QueueURL when url is not empty: a ListQueue with metadata has it, as
// one without does (the Java and Python SDKs read it there).
func appendQueueAttrs(b []byte, info *QueueInfo, ns bool, url string) []byte {
	b = append(b, "<Queue"...)
	if ns {
		b = append(b, xmlNS...)
	}
	b = append(b, '>')
	if url != "" {
		b = appendElem(b, "QueueURL", url)
	}
	a := &info.Attributes
	b = appendElem(b, "QueueName", info.Name)
	b = appendIntElem(b, "CreateTime", info.CreateTime.Unix())
	b = appendIntElem(b, "LastModifyTime", info.LastModifyTime.Unix())
	b = appendIntElem(b, "VisibilityTimeout", int64(a.VisibilityTimeout))
	b = appendIntElem(b, "MaximumMessageSize", int64(a.MaximumMessageSize))
	b = appendIntElem(b, "MessageRetentionPeriod", int64(a.MessageRetentionPeriod))
	b = appendIntElem(b, "DelaySeconds", int64(a.DelaySeconds))
	b = appendIntElem(b, "PollingWaitSeconds", int64(a.PollingWaitSeconds))
	b = appendIntElem(b, "ActiveMessages", int64(info.Active))
	b = appendIntElem(b, "InactiveMessages", int64(info.Inactive))
	b = appendIntElem(b, "DelayMessages", int64(info.Delayed))
	b = appendElem(b, "LoggingEnabled", strconv.FormatBool(a.LoggingEnabled))
	b = appendElem(b, "QueueType", a.queueType())
	if a.MaxReceiveCount > 0 {
		b = append(b, "<DlqPolicy>"...)
		b = appendElem(b, "Enabled", "true")
		b = appendElem(b, "DeadLetterTargetQueue", a.DeadLetterQueue)
		b = appendIntElem(b, "MaxReceiveCount", int64(a.MaxReceiveCount))
		b = append(b, "</DlqPolicy>"...)
	}
	return append(b, "</Queue>"...)
}

func appendError(b []byte, e *apiError, requestID, hostID string) []byte {
	b = append(b, xmlHeader...)
	b = append(b, "<Error"+xmlErrorNS+">"...)
	b = appendElem(b, "Code", e.code)
	b = appendElem(b, "Message", e.message)
	b = appendElem(b, "RequestId", requestID)
	b = appendElem(b, "HostId", hostID)
	return append(b, "</Error>"...)
}
