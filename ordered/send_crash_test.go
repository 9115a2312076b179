package ordered_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/mnsqueue"
	"github.com/inorder/inorder/ordered/mnsqueue/mnstest"
	"github.com/inorder/inorder/seqstore/filestore"
)

// The crash test runs the sender as a child process (this test binary, run
// again with crashEnv set) that sends through the MNS driver to an emulator
// in the parent, with its sequence state in a filestore. The parent kills it
// with SIGKILL at random moments, starts it again, and finally checks what
// reached the queue against what the children reported as sent.

const crashEnv = "INORDER_SEND_CRASH_CHILD"

const (
	crashQueue   = "crash"
	crashWriters = 4
)

// TestSendCrashChild is the child's body; it does nothing in a normal run.
func TestSendCrashChild(t *testing.T) {
	mode := os.Getenv(crashEnv)
	if mode == "" {
		t.Skip("runs only as the child of TestSendDurableSurvivesSIGKILL")
	}
	if err := crashChild(mode); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func crashChild(mode string) error {
	ctx := context.Background()
	store, err := filestore.Open(os.Getenv("INORDER_CRASH_DIR"), nil)
	if err != nil {
		return err
	}
	cred := mnsqueue.Credentials{AccessKeyID: os.Getenv("INORDER_CRASH_KEY"), AccessKeySecret: os.Getenv("INORDER_CRASH_SECRET")}
	drv, err := mnsqueue.New(ctx, os.Getenv("INORDER_CRASH_ENDPOINT"), crashQueue, cred, nil)
	if err != nil {
		return err
	}
	if mode == "drain" {
		return crashDrain(ctx, drv)
	}
	q, err := ordered.New(ctx, drv, store, &ordered.Options{Name: "crash"})
	if err != nil {
		return err
	}
	if mode == "final" {
		// Recovery runs in New; Close waits for it.
		if err := q.Close(ctx); err != nil {
			return err
		}
		fmt.Println("done")
		return nil
	}
	// Send until killed; report every Send that returned nil.
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			for k := 0; ; k++ {
				payload := fmt.Sprintf("%s-%d-%d", mode, w, k)
				if err := q.Send(ctx, "g"+strconv.Itoa(w), []byte(payload)); err != nil {
					out.Lock()
					fmt.Println("error", err)
					out.Unlock()
					return
				}
				out.Lock()
				fmt.Println("ok", payload)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	return nil
}

// crashDrain prints and deletes every message in the queue. It runs in a
// child so that the parent holds no SDK connections (whose cleaner
// goroutines outlive a test).
func crashDrain(ctx context.Context, drv *mnsqueue.Queue) error {
	for {
		msgs, err := drv.ReceiveBatch(ctx, 16, time.Second)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			fmt.Println("done")
			return nil
		}
		receipts := make([]string, 0, len(msgs))
		for _, m := range msgs {
			receipts = append(receipts, m.Receipt)
			fmt.Printf("msg %q\n", m.Body)
		}
		if err := drv.DeleteBatch(ctx, receipts); err != nil {
			return err
		}
	}
}

func TestSendDurableSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	srv, err := mnstest.NewServer(&mnstest.Options{Faults: mnstest.Faults{Latency: time.Millisecond, Jitter: 2 * time.Millisecond}})
	require.NoError(t, err)
	defer srv.Close()
	require.NoError(t, srv.CreateQueue(crashQueue, nil))
	dir := t.TempDir()

	// run starts a child in mode. With kill > 0 it kills the child that
	// long after its first ack and returns the payloads it acked; else it
	// waits for the child and returns the bodies it printed ("msg" lines).
	// A child that never acks, or never finishes, is killed after a
	// minute and fails the test: it must not hang it until go test's
	// timeout, whose panic would leave the child running.
	run := func(mode string, kill time.Duration) (lines []string) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSendCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			crashEnv+"="+mode,
			"INORDER_CRASH_DIR="+dir,
			"INORDER_CRASH_ENDPOINT="+srv.Endpoint(),
			"INORDER_CRASH_KEY="+srv.AccessKeyID(),
			"INORDER_CRASH_SECRET="+srv.AccessKeySecret(),
		)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		var timer *time.Timer
		if kill > 0 {
			// Count from the first ack, so that every round sends.
			var once sync.Once
			defer func() {
				if timer != nil {
					timer.Stop()
				}
			}()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "ok "):
					lines = append(lines, strings.TrimPrefix(line, "ok "))
					once.Do(func() { timer = time.AfterFunc(kill, func() { _ = cmd.Process.Kill() }) })
				case strings.HasPrefix(line, "error "):
					t.Errorf("child %s: %s", mode, line)
				}
			}
			_ = cmd.Wait() // killed
			require.NoError(t, ctx.Err(), "child %s: no ack within a minute (%d acks)", mode, len(lines))
			return lines
		}
		sc := bufio.NewScanner(stdout)
		done := false
		for sc.Scan() {
			line := sc.Text()
			done = done || line == "done"
			if strings.HasPrefix(line, "error ") {
				t.Errorf("child %s: %s", mode, line)
			}
			if body, ok := strings.CutPrefix(line, "msg "); ok {
				unq, err := strconv.Unquote(body)
				require.NoError(t, err, "child output %q", line)
				lines = append(lines, unq)
			}
		}
		werr := cmd.Wait()
		require.NoError(t, ctx.Err(), "child %s did not finish within a minute", mode)
		require.NoError(t, werr, "child %s", mode)
		require.True(t, done, "child %s finished", mode)
		return lines
	}

	var acked []string
	for round := range 6 {
		acked = append(acked, run("r"+strconv.Itoa(round), time.Duration(20+rand.IntN(200))*time.Millisecond)...)
	}
	run("final", 0)
	require.NotEmpty(t, acked)

	bodies := run("drain", 0)
	type key struct {
		group string
		seq   uint64
	}
	bySeq := make(map[key]string)
	seqOf := make(map[string]key)
	epochs := make(map[string]map[uint64]bool)
	copies := 0
	for _, b := range bodies {
		h, p, ok := envelope.Parse([]byte(b))
		require.True(t, ok, "tagged body %q", b)
		k := key{h.Group, h.Seq}
		if prev, ok := bySeq[k]; ok {
			copies++
			require.Equal(t, prev, string(p), "two payloads under group %s seq %d", h.Group, h.Seq)
		}
		bySeq[k] = string(p)
		if prev, ok := seqOf[string(p)]; ok {
			require.Equal(t, prev, k, "payload %s under two seqs", p)
		}
		seqOf[string(p)] = k
		if epochs[h.Group] == nil {
			epochs[h.Group] = make(map[uint64]bool)
		}
		epochs[h.Group][h.Epoch] = true
	}

	// Every Send that returned nil reached the queue.
	for _, p := range acked {
		_, ok := seqOf[p]
		assert.True(t, ok, "acknowledged payload %s never reached the queue", p)
	}
	// Each group is one epoch with seqs 1..max and no hole: what was
	// reserved and journaled before a kill was sent by a later recovery.
	require.Len(t, epochs, crashWriters)
	for g, es := range epochs {
		assert.Len(t, es, 1, "group %s: one epoch (the filestore kept it)", g)
		max := uint64(0)
		for k := range bySeq {
			if k.group == g {
				max = maxU(max, k.seq)
			}
		}
		for s := uint64(1); s <= max; s++ {
			if _, ok := bySeq[key{g, s}]; !ok {
				t.Errorf("group %s: hole at seq %d of %d", g, s, max)
				break
			}
		}
	}
	t.Logf("%d acknowledged sends over 6 kills, %d distinct messages in the queue, %d copies (recovery re-sends)",
		len(acked), len(bySeq), copies)
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
