package mnstest_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The SDK's fasthttp client keeps per-host cleaner goroutines that sleep
	// for its idle-connection period after the last request, and fasthttp's
	// process-wide dialer keeps a DNS cache cleaner; they belong to the
	// client, which the SDK gives no way to close.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}
