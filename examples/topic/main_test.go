package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// fasthttp's connection cleaners (under the MNS SDK) exit a while after
	// the last connection closed.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	)
}

// TestRun runs the example on the emulator and checks that each of the
// three subscribers printed every group's messages, in order.
func TestRun(t *testing.T) {
	t.Setenv("MNS_ENDPOINT", "") // the emulator, even where real MNS is configured
	var out strings.Builder
	c := config{out: &out, groups: 4, messages: 30, name: "topic-test", seed: 7, timeout: time.Minute}
	require.NoError(t, run(context.Background(), c), "output:\n%s", out.String())
	text := out.String()
	want := "1"
	for i := 2; i <= 30; i++ {
		want += " " + strconv.Itoa(i)
	}
	for _, format := range []string{"SIMPLIFIED", "XML", "JSON"} {
		_, block, ok := strings.Cut(text, format+" subscriber:\n")
		require.True(t, ok, "no %s block:\n%s", format, text)
		block, _, _ = strings.Cut(block, " subscriber:")
		for _, g := range []string{"g0", "g1", "g2", "g3"} {
			assert.Contains(t, block, "  "+g+": "+want+"\n", "%s subscriber, group %s in order:\n%s", format, g, text)
		}
	}
	assert.Contains(t, text, "emulator: 120 published")
}
