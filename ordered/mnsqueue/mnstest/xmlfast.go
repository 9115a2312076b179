package mnstest

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// A fast path for the two request bodies on the hot path, in exactly the
// shape the SDK marshals them: no declaration, namespace, attributes,
// comments or whitespace between elements, ASCII text. Anything else
// (including anything this parser is unsure of) makes it give up, and the
// caller decodes with encoding/xml, so the two always agree; FuzzFastXML
// checks that they do.

type scanner struct {
	b []byte
	i int
}

// lit consumes p if the input continues with it.
func (s *scanner) lit(p string) bool {
	if len(s.b)-s.i >= len(p) && string(s.b[s.i:s.i+len(p)]) == p {
		s.i += len(p)
		return true
	}
	return false
}

func (s *scanner) peek(p string) bool {
	return len(s.b)-s.i >= len(p) && string(s.b[s.i:s.i+len(p)]) == p
}

// openTag consumes "<Name>" (ASCII letters only) and returns Name.
func (s *scanner) openTag() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '<' {
		return nil, false
	}
	j := s.i + 1
	for j < len(s.b) && (s.b[j] >= 'a' && s.b[j] <= 'z' || s.b[j] >= 'A' && s.b[j] <= 'Z') {
		j++
	}
	if j == s.i+1 || j >= len(s.b) || s.b[j] != '>' {
		return nil, false
	}
	name := s.b[s.i+1 : j]
	s.i = j + 1
	return name, true
}

// closeTag consumes "</name>".
func (s *scanner) closeTag(name []byte) bool {
	n := len(name) + 3
	if len(s.b)-s.i < n || s.b[s.i] != '<' || s.b[s.i+1] != '/' || s.b[s.i+n-1] != '>' ||
		!bytes.Equal(s.b[s.i+2:s.i+n-1], name) {
		return false
	}
	s.i += n
	return true
}

// text reads character data up to the next '<', decoding entities.
func (s *scanner) text() (string, bool) {
	start := s.i
	plain := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '<':
			if plain {
				return string(s.b[start:s.i]), true
			}
			return decodeEntities(s.b[start:s.i])
		case c == '&':
			plain = false
		case c == '>' || c == ']' || c >= utf8.RuneSelf || c < 0x20 && c != '\t' && c != '\n':
			// '>' and ']' could start "]]>", which encoding/xml rejects;
			// raw '\r' is normalised by it; non-ASCII needs validation.
			return "", false
		}
		s.i++
	}
	return "", false
}

// decodeEntities resolves the predefined entities and character references.
func decodeEntities(b []byte) (string, bool) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c != '&' {
			out = append(out, c)
			i++
			continue
		}
		end := bytes.IndexByte(b[i:], ';')
		if end < 0 {
			return "", false
		}
		ent := b[i+1 : i+end]
		i += end + 1
		switch string(ent) {
		case "lt":
			out = append(out, '<')
		case "gt":
			out = append(out, '>')
		case "amp":
			out = append(out, '&')
		case "quot":
			out = append(out, '"')
		case "apos":
			out = append(out, '\'')
		default:
			if len(ent) < 2 || ent[0] != '#' {
				return "", false
			}
			var v uint64
			var err error
			if ent[1] == 'x' {
				v, err = strconv.ParseUint(string(ent[2:]), 16, 32)
			} else {
				v, err = strconv.ParseUint(string(ent[1:]), 10, 32)
			}
			if err != nil || len(ent) > 10 || !inXMLRange(rune(v)) {
				return "", false // unusual: encoding/xml decides
			}
			out = utf8.AppendRune(out, rune(v))
		}
	}
	return string(out), true
}

// entry reads the elements of one <Message> up to its end tag.
func (s *scanner) entry(e *sendEntry) bool {
	var seen uint8
	for !s.peek("</") {
		name, ok := s.openTag()
		if !ok {
			return false
		}
		text, ok := s.text()
		if !ok || !s.closeTag(name) {
			return false
		}
		var bit uint8
		switch string(name) {
		case "MessageBody":
			bit = 1
			e.MessageBody = &text
		case "DelaySeconds":
			bit = 2
			e.DelaySeconds = text
		case "Priority":
			bit = 4
			e.Priority = text
		case "MessageGroupId":
			bit = 8
			e.MessageGroupID = &text
		default:
			return false
		}
		if seen&bit != 0 {
			return false // repeated: leave the rules to encoding/xml
		}
		seen |= bit
	}
	return true
}

// fastSendBody parses a <Message> or <Messages> body of the SDK's shape.
func fastSendBody(body []byte, sb *sendBody) bool {
	s := scanner{b: body}
	switch {
	case s.lit("<Messages>"):
		sb.XMLName.Local = "Messages"
		for s.lit("<Message>") {
			var e sendEntry
			if !s.entry(&e) || !s.lit("</Message>") {
				return false
			}
			sb.Messages = append(sb.Messages, e)
		}
		return s.lit("</Messages>") && s.i == len(body)
	case s.lit("<Message>"):
		sb.XMLName.Local = "Message"
		var e sendEntry
		if !s.entry(&e) || !s.lit("</Message>") || s.i != len(body) {
			return false
		}
		sb.sendEntry = e
		return true
	}
	return false
}

// fastHandlesBody parses a <ReceiptHandles> body of the SDK's shape.
func fastHandlesBody(body []byte, hb *handlesBody) bool {
	s := scanner{b: body}
	if !s.lit("<ReceiptHandles>") {
		return false
	}
	hb.XMLName.Local = "ReceiptHandles"
	for s.lit("<ReceiptHandle>") {
		h, ok := s.text()
		if !ok || !s.lit("</ReceiptHandle>") {
			return false
		}
		hb.Handles = append(hb.Handles, h)
	}
	return s.lit("</ReceiptHandles>") && s.i == len(body)
}
