package mnstest

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What the official MNS Java SDK 2.0.0 (aliyun/aliyun-mns-java-sdk) reads
// and writes, checked at the wire level: Maven Central is out of reach
// here, so the SDK itself does not run in these tests.

// javaNS is the namespace of the Java SDK's MNSConstants.DEFAULT_XML_NAMESPACE
// (src/main/java/com/aliyun/mns/common/MNSConstants.java), without a
// trailing slash.
const javaNS = "http://mns.aliyuncs.com/doc/v1"

// javaError decodes an error body as the Java SDK's ErrorMessage does:
// JAXB over a namespace-aware parser, root <Error> and its children in
// javaNS (src/main/java/com/aliyun/mns/model/ErrorMessage.java,
// common/parser/JAXBResultParser.java). encoding/xml checks the namespace
// of a tag that names one, so any other namespace fails to match.
type javaError struct {
	XMLName   xml.Name `xml:"http://mns.aliyuncs.com/doc/v1 Error"`
	Code      string   `xml:"http://mns.aliyuncs.com/doc/v1 Code"`
	Message   string   `xml:"http://mns.aliyuncs.com/doc/v1 Message"`
	RequestID string   `xml:"http://mns.aliyuncs.com/doc/v1 RequestId"`
	HostID    string   `xml:"http://mns.aliyuncs.com/doc/v1 HostId"`
}

// TestJavaErrorNamespace: the Java SDK reads an error only in javaNS; with
// the documentation's "…/doc/v1/" it throws a parse error instead, so an
// empty receive is not seen as MessageNotExist.
func TestJavaErrorNamespace(t *testing.T) {
	s := newRawServer(t)
	a := do(t, s, "GET", "/queues/raw/messages?waitseconds=0", "", nil)
	require.Equal(t, 404, a.status, a.body)
	assert.Contains(t, a.body, `<Error xmlns="`+javaNS+`">`, "the exact namespace written")
	var e javaError
	require.NoError(t, xml.Unmarshal([]byte(a.body), &e), a.body)
	assert.Equal(t, CodeMessageNotExist, e.Code, "Code in the namespace: %s", a.body)
	assert.Equal(t, "Message not exist.", e.Message)
	assert.NotEmpty(t, e.RequestID)
	assert.True(t, strings.HasPrefix(e.HostID, "http://"), e.HostID)
}
