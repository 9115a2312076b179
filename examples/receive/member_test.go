package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/ordered/scaleout"
	"github.com/inorder/inorder/seqstore"
	"github.com/inorder/inorder/seqstore/memstore"
)

// lockedBuffer is a writer that several goroutines share, read while they
// write.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two members (-shards 4 -member m1, m2) share a logical queue through
// leases in one SQLite file: m1 starts alone and takes every shard, m2
// joins and m1 hands it its shards; both print their shards' changes and
// the owners as they change; every group is handled in order, once, across
// the two; both hand their shards over when stopped and exit 0.
func TestMembers(t *testing.T) {
	srv, err := mnstest.NewServer(nil)
	require.NoError(t, err)
	defer srv.Close()
	t.Setenv("INORDER_STORE", "")
	t.Setenv("MNS_ENDPOINT", srv.Endpoint())
	t.Setenv("MNS_ACCESS_KEY_ID", srv.AccessKeyID())
	t.Setenv("MNS_ACCESS_KEY_SECRET", srv.AccessKeySecret())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	store := "sqlite:" + filepath.Join(t.TempDir(), "leases.db")
	const shards, groups, per = 4, 6, 10

	var stdout lockedBuffer // one for both: lines in the order they were handled
	stderrs := map[string]*lockedBuffer{"m1": {}, "m2": {}}
	codes := map[string]chan int{}
	stops := map[string]context.CancelFunc{}
	start := func(member string) {
		mctx, stop := context.WithCancel(ctx)
		code := make(chan int, 1)
		codes[member], stops[member] = code, stop
		go func() {
			code <- command(mctx, []string{"-queue", "sample", "-store", store, "-shards", strconv.Itoa(shards),
				"-member", member, "-ttl", "1500ms", "-timeout", "50s"}, &stdout, stderrs[member])
		}()
	}
	start("m1")
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not within the time; m1:\n%s\nm2:\n%s", what, stderrs["m1"], stderrs["m2"])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("m1 owns every shard", func() bool { return strings.Contains(stderrs["m1"].String(), "owners: m1 [0 1 2 3]\n") })
	start("m2")

	// A sender of the logical queue: each group to its shard's queue.
	var shs []scaleout.Shard
	for i := range shards {
		q, err := mnsqueue.New(ctx, srv.Endpoint(), fmt.Sprintf("sample-%d", i), mnsqueue.Credentials{AccessKeyID: srv.AccessKeyID(), AccessKeySecret: srv.AccessKeySecret()}, nil)
		require.NoError(t, err)
		defer q.Close()
		shs = append(shs, scaleout.Shard{Name: fmt.Sprintf("sample-%d", i), Queue: q})
	}
	snd, err := scaleout.NewSender(ctx, shs, memstore.New(), &ordered.Options{Name: "sample", Send: ordered.SendOptions{NoRecover: true}})
	require.NoError(t, err)
	for k := 1; k <= per; k++ {
		for g := range groups {
			require.NoError(t, snd.Send(ctx, fmt.Sprintf("g%d", g), []byte(strconv.Itoa(k))))
		}
		time.Sleep(100 * time.Millisecond) // the handover to m2 happens while messages come
	}
	require.NoError(t, snd.Close(ctx))

	line := regexp.MustCompile(`(?m)^receive message body is (\d+) \(group (g\d+), shard (\d)\)$`)
	waitFor("every message handled", func() bool { return len(line.FindAllString(stdout.String(), -1)) >= groups*per })
	waitFor("the shards spread over both", func() bool {
		o := regexp.MustCompile(`owners: m1 \[[0-9 ]+\], m2 \[[0-9 ]+\]\n`)
		return o.MatchString(stderrs["m1"].String()) && o.MatchString(stderrs["m2"].String())
	})
	for _, m := range []string{"m2", "m1"} {
		stops[m]()
		assert.Equal(t, 0, <-codes[m], "%s exits 0 when stopped; stderr:\n%s", m, stderrs[m])
	}

	next := map[string]int{}
	for _, l := range line.FindAllStringSubmatch(stdout.String(), -1) {
		k, _ := strconv.Atoi(l[1])
		g, s := l[2], l[3]
		assert.Equal(t, next[g]+1, k, "group %s: message %d while %d was due (each once, in order)", g, k, next[g]+1)
		next[g] = k
		assert.Equal(t, strconv.Itoa(scaleout.ShardOf(g, shards)), s, "the shard printed is the group's")
	}
	for g := range groups {
		assert.Equal(t, per, next[fmt.Sprintf("g%d", g)], "group g%d handled to the end", g)
	}
	m1, m2 := stderrs["m1"].String(), stderrs["m2"].String()
	t.Logf("m1:\n%s\nm2:\n%s", m1, m2)
	assert.Regexp(t, `receive: member m1 of sample: 4 shard queues sample-0..sample-3; leases in sqlite:`, m1)
	assert.Regexp(t, `receive: m1 acquired shard \d \(token \d+\)`, m1)
	assert.Regexp(t, `receive: m1 hands shard \d over: draining`, m1, "m1 hands m2 its shards")
	assert.Regexp(t, `receive: m1 released shard \d \(token \d+\): drained`, m1)
	assert.Regexp(t, `receive: m2 acquired shard \d \(token \d+\)`, m2)
	assert.Regexp(t, `receive: member m2 handled [1-9]\d* messages`, m2, "m2 took part")
}

// -shards refuses a filestore (it holds no leases) and bad values; -member
// needs -shards.
func TestMemberFlags(t *testing.T) {
	t.Setenv("INORDER_STORE", "")
	t.Setenv("MNS_ENDPOINT", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-shards", "4", "-store", t.TempDir()}, "is a filestore, which holds no leases"},
		{[]string{"-shards", "4"}, "is a filestore, which holds no leases"}, // the default store
		{[]string{"-member", "m1"}, "-member needs -shards"},
		{[]string{"-shards", strconv.Itoa(seqstore.MaxShards + 1), "-store", "sqlite:x.db"}, "-shards 1025: want 1..1024"},
		{[]string{"-shards", "2", "-ttl", "100ms", "-store", "sqlite:x.db"}, "-ttl 100ms: want at least 600ms"},
	} {
		var stdout, stderr strings.Builder
		assert.Equal(t, 1, command(t.Context(), c.args, &stdout, &stderr), "%v", c.args)
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}
