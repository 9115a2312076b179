package mnsqueue

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Defaults and bounds of the fields of Options.
const (
	// DefaultPriority is the MNS default priority. The SDK sends 0 unless told
	// otherwise, so the driver always sends a priority explicitly.
	DefaultPriority = 8
	// DefaultTimeout is the SDK's per-request timeout (its TimeoutSecond).
	DefaultTimeout = 35 * time.Second
	// MinTimeout is the shortest Options.Timeout accepted: the longest
	// long-poll wait (30s) plus a margin. A shorter timeout would end long
	// polls on the client side while the service still holds them, and a
	// request that times out may have taken effect (a receive that made its
	// messages invisible).
	MinTimeout = MaxWait + 2*time.Second
	// DefaultMaxConns is the SDK's default connection limit per host.
	DefaultMaxConns = 512
	// DefaultCloseTimeout bounds how long Close waits for calls in progress.
	DefaultCloseTimeout = 5 * time.Second
)

// Environment variables read when Credentials.AccessKeyID is empty; they are
// the ones the SDK's NewClient reads.
const (
	EnvAccessKeyID     = "ALIBABA_CLOUD_ACCESS_KEY_ID"
	EnvAccessKeySecret = "ALIBABA_CLOUD_ACCESS_KEY_SECRET"
	EnvSecurityToken   = "ALIBABA_CLOUD_SECURITY_TOKEN"
)

// Credentials authenticate requests. An empty AccessKeyID means the
// environment (EnvAccessKeyID, EnvAccessKeySecret and EnvSecurityToken), as
// the SDK's NewClient does; other providers of the Alibaba Cloud credential
// chain (profile files, instance roles) are not consulted.
//
// Credentials never print their secret or token: String, GoString (%v, %+v,
// %#v, %s) and LogValue (log/slog) show the key id and "[REDACTED]" in
// their place.
type Credentials struct {
	AccessKeyID, AccessKeySecret string
	// SecurityToken, when set, makes the credentials STS credentials.
	SecurityToken string
}

// redacted stands for a secret in printed Credentials.
const redacted = "[REDACTED]"

// redact returns redacted for a set secret and "" for an empty one, so that
// a printout still tells a missing secret from a present one.
func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return redacted
}

// String implements fmt.Stringer (the verbs %v, %+v and %s) without the
// secret and the token.
func (c Credentials) String() string {
	return fmt.Sprintf("{AccessKeyID:%s AccessKeySecret:%s SecurityToken:%s}",
		c.AccessKeyID, redact(c.AccessKeySecret), redact(c.SecurityToken))
}

// GoString implements fmt.GoStringer (the verb %#v) without the secret and
// the token.
func (c Credentials) GoString() string {
	return fmt.Sprintf("mnsqueue.Credentials{AccessKeyID:%q, AccessKeySecret:%q, SecurityToken:%q}",
		c.AccessKeyID, redact(c.AccessKeySecret), redact(c.SecurityToken))
}

// LogValue implements slog.LogValuer: a group of the key id and the
// redacted secret and token.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("access_key_id", c.AccessKeyID),
		slog.String("access_key_secret", redact(c.AccessKeySecret)),
		slog.String("security_token", redact(c.SecurityToken)),
	)
}

// resolve returns c, or the environment's credentials when c has no key id.
func (c Credentials) resolve() (Credentials, error) {
	if c.AccessKeyID == "" {
		c = Credentials{
			AccessKeyID:     os.Getenv(EnvAccessKeyID),
			AccessKeySecret: os.Getenv(EnvAccessKeySecret),
			SecurityToken:   os.Getenv(EnvSecurityToken),
		}
		if c.AccessKeyID == "" {
			return c, fmt.Errorf("mnsqueue: no access key id: set Credentials or %s", EnvAccessKeyID)
		}
	}
	if c.AccessKeySecret == "" {
		return c, errors.New("mnsqueue: empty access key secret")
	}
	return c, nil
}

// Options configures a Queue. A nil *Options means all defaults; the zero
// value of every field means its default.
type Options struct {
	// Raw sends bodies as text, without base64, for interoperation with
	// peers that send and expect plain text. A raw body must be valid UTF-8
	// made of characters XML allows (the SDK's XML encoder would otherwise
	// replace them silently); SendBatch rejects other bodies with
	// ErrInvalidBody. By default bodies are base64-encoded (StdEncoding),
	// which is binary-safe and what the other MNS SDKs do.
	Raw bool
	// Priority of sent messages, 1 (highest) to 16 (default 8).
	Priority int64
	// Visibility is the queue's visibility timeout, when known. If it is 0,
	// New reads the queue's attributes (GetQueueAttributes), which also
	// gives the maximum message size and the polling wait; a user without
	// permission to read them sets Visibility (whole seconds).
	Visibility time.Duration
	// QueueType is the type the queue must have: QueueTypeNormal or
	// QueueTypeFIFO, or "" for whatever the service says. New reads it
	// with the attributes and fails with ErrQueueType on a mismatch (a
	// FIFO queue where a standard one was meant, or the reverse); with
	// Visibility set it is not read, and "" means a standard queue. On a
	// FIFO queue every message is sent with its group as MessageGroupId
	// (the driver implements driver.Grouped).
	QueueType string
	// Timeout is the SDK's per-request timeout (default 35s, at least
	// MinTimeout, whole seconds). It must exceed the longest long-poll wait:
	// a request that times out on the client may have taken effect.
	Timeout time.Duration
	// MaxConns bounds the connections to the service, and so the requests
	// in progress (default 512). Calls beyond it wait for a free one.
	MaxConns int
	// CloseTimeout bounds how long Close waits for requests in progress
	// (default 5s).
	CloseTimeout time.Duration
	// Logger receives warnings (bodies that fail to decode, released
	// messages); nil discards them.
	Logger *slog.Logger
	// MessageTag, for a Topic, is the tag of every message it publishes
	// (at most 16 characters; default none). A subscription whose
	// FilterTag equals it receives them all; one with another FilterTag
	// none. A filter makes holes in an ordered stream by design, so give
	// each tag its own publisher and stream names.
	MessageTag string
	// KeepNotifications, for a Queue subscribed to a topic, delivers the
	// XML or JSON notification of each message as it came instead of the
	// published body inside it. By default a body that is a topic
	// notification (a <Notification> document or a JSON object with the
	// service's keys, which a subscription in the XML or JSON format
	// writes) is unwrapped first; see the package documentation, section
	// Topics.
	KeepNotifications bool
}

// withDefaults returns a validated copy of o (which may be nil) with the
// defaults filled in.
func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Priority == 0 {
		v.Priority = DefaultPriority
	}
	if v.Timeout == 0 {
		v.Timeout = DefaultTimeout
	}
	if v.MaxConns == 0 {
		v.MaxConns = DefaultMaxConns
	}
	if v.CloseTimeout == 0 {
		v.CloseTimeout = DefaultCloseTimeout
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v, v.validate()
}

// validate reports the first field out of range.
func (o *Options) validate() error {
	switch {
	case o.Priority < 1 || o.Priority > 16:
		return fmt.Errorf("mnsqueue: Priority %d out of range 1..16", o.Priority)
	case o.Visibility != 0 && (o.Visibility < MinVisibility || o.Visibility > MaxVisibility || o.Visibility%time.Second != 0):
		return fmt.Errorf("mnsqueue: Visibility %v must be whole seconds in %v..%v", o.Visibility, MinVisibility, MaxVisibility)
	case o.Timeout < MinTimeout || o.Timeout%time.Second != 0:
		return fmt.Errorf("mnsqueue: Timeout %v must be whole seconds, at least %v (longest wait plus a margin)", o.Timeout, MinTimeout)
	case o.MaxConns < 1:
		return fmt.Errorf("mnsqueue: MaxConns %d must be positive", o.MaxConns)
	case o.CloseTimeout < 0:
		return fmt.Errorf("mnsqueue: negative CloseTimeout %v", o.CloseTimeout)
	case o.QueueType != "" && o.QueueType != QueueTypeNormal && o.QueueType != QueueTypeFIFO:
		return fmt.Errorf("mnsqueue: QueueType %q must be %q, %q or empty", o.QueueType, QueueTypeNormal, QueueTypeFIFO)
	case len(o.MessageTag) > maxTagLen:
		return fmt.Errorf("mnsqueue: MessageTag %q longer than %d characters", o.MessageTag, maxTagLen)
	}
	return nil
}
