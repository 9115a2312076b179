package mnsqueue_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered/mnsqueue"
)

// TestCredentialsRedacted prints Credentials every way a program might (fmt
// verbs, nested in a struct, slog text and JSON, as a value and a pointer)
// and checks that the key id shows and the secret and the token never do.
func TestCredentialsRedacted(t *testing.T) {
	const (
		id     = "LTAI-key-id-visible"
		secret = "s3cr3t-must-not-print"
		token  = "sts-token-must-not-print"
	)
	c := mnsqueue.Credentials{AccessKeyID: id, AccessKeySecret: secret, SecurityToken: token}
	wrapper := struct{ Cred mnsqueue.Credentials }{c}
	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		outputs[verb] = fmt.Sprintf(verb, c)
		outputs[verb+" pointer"] = fmt.Sprintf(verb, &c)
		outputs[verb+" nested"] = fmt.Sprintf(verb, wrapper)
	}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"slog json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("value", "cred", c)
		log.Info("pointer", "cred", &c)
		log.Info("any", slog.Any("cred", c))
		log.With("cred", c).Info("with")
		outputs[name] = buf.String()
	}
	for name, out := range outputs {
		assert.Contains(t, out, id, "%s: the key id should show: %s", name, out)
		assert.NotContains(t, out, secret, "%s printed the secret: %s", name, out)
		assert.NotContains(t, out, token, "%s printed the token: %s", name, out)
		assert.Contains(t, out, "REDACTED", "%s should mark what it hid: %s", name, out)
	}

	var line map[string]any
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "cred", c)
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "slog JSON output parses")
	assert.Equal(t, map[string]any{"access_key_id": id, "access_key_secret": "[REDACTED]", "security_token": "[REDACTED]"},
		line["cred"], "slog JSON group of the credentials")

	empty := fmt.Sprintf("%+v", mnsqueue.Credentials{AccessKeyID: id})
	assert.False(t, strings.Contains(empty, "REDACTED"), "a missing secret prints as empty, not as redacted: %s", empty)
}
