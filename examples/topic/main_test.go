package main

import (
	"context"
	"net"
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

// TestCommandLine: -h prints the usage with the environment and exits 0;
// real MNS that refuses the connection gets a hint.
func TestCommandLine(t *testing.T) {
	var stdout, stderr strings.Builder
	require.Equal(t, 0, command(t.Context(), []string{"-h"}, &stdout, &stderr), "-h is a success")
	for _, want := range []string{"Usage of topic:", "-groups", "-keep", "Environment:", "MNS_ENDPOINT", "MNS_ACCESS_KEY_ID", "MNS_ACCESS_KEY_SECRET"} {
		assert.Contains(t, stderr.String(), want, "usage")
	}
	stderr.Reset()
	assert.Equal(t, 2, command(t.Context(), []string{"-groups", "x"}, &stdout, &stderr), "a bad flag")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	t.Setenv("MNS_ENDPOINT", "http://"+addr+"/.")
	t.Setenv("MNS_ACCESS_KEY_ID", "inorder")
	t.Setenv("MNS_ACCESS_KEY_SECRET", "inorder-secret")
	stderr.Reset()
	assert.Equal(t, 1, command(t.Context(), []string{"-timeout", "10s"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "topic: nothing listens at "+addr+": start the MNS emulator there with", "stderr:\n%s", stderr.String())
}
