package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/inorder/inorder/ordered"
	"github.com/inorder/inorder/ordered/driver"
	"github.com/inorder/inorder/seqstore/filestore"
)

// The stuck-group step: a sender in fast mode (SendFast) whose send of seq
// 2 fails leaves a hole nothing will fill, since fast mode journals
// nothing to send again. Its receiver, under GapWait, delivers seq 1, then
// waits: the group is stuck until an operator skips the hole
// (Queue.SkipHole, or the status page's button).

const stuckGroupName = "acct-7"

// errLost is the send the demo's lossyQueue loses.
var errLost = errors.New("lost on the way (the demo's lossy driver)")

// lossyQueue passes everything to its queue, except the one send it was
// told to lose: that fails with errLost, which is not retryable, and its
// bodies are kept, to be delivered late (deliverLost), as a request stuck
// in a network might be.
type lossyQueue struct {
	driver.Queue

	mu   sync.Mutex
	lose bool
	lost [][]byte
}

// loseNext makes the next SendBatch fail with errLost.
func (l *lossyQueue) loseNext() {
	l.mu.Lock()
	l.lose = true
	l.mu.Unlock()
}

func (l *lossyQueue) SendBatch(ctx context.Context, bodies [][]byte) error {
	l.mu.Lock()
	if l.lose {
		l.lose = false
		for _, b := range bodies {
			l.lost = append(l.lost, bytes.Clone(b))
		}
		l.mu.Unlock()
		return errLost
	}
	l.mu.Unlock()
	return l.Queue.SendBatch(ctx, bodies)
}

func (l *lossyQueue) IsRetryable(err error) bool {
	return !errors.Is(err, errLost) && l.Queue.IsRetryable(err)
}

// deliverLost sends the bodies of the lost send, as they were, now.
func (l *lossyQueue) deliverLost(ctx context.Context) error {
	l.mu.Lock()
	lost := l.lost
	l.lost = nil
	l.mu.Unlock()
	if len(lost) == 0 {
		return errors.New("no lost send to deliver")
	}
	return retry(ctx, l.Queue, func() error { return l.Queue.SendBatch(ctx, lost) })
}

// stuckGroup is step 4's Queue and what it needs until it is closed.
type stuckGroup struct {
	q      *ordered.Queue
	drv    driver.Queue
	lossy  *lossyQueue
	store  *filestore.Store
	meters *meters // nil without -metrics
	gaps   chan ordered.Event
	late   chan ordered.Event
	held   bool // left stuck for the page to repair (-hold)
}

// stuck runs step 4 over a queue of its own and a fresh filestore. Without
// -hold it repairs the group itself and returns nil; with -hold it returns
// the Queue still stuck, for hold to finish and close.
func stuck(c config, qs *queues, dir string) (_ *stuckGroup, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drv, err := qs.open("stuck")
	if err != nil {
		return nil, err
	}
	g := &stuckGroup{
		drv:   drv,
		lossy: &lossyQueue{Queue: drv},
		gaps:  make(chan ordered.Event, 1),
		late:  make(chan ordered.Event, 1),
	}
	defer func() {
		if err != nil || !g.held {
			err = errors.Join(err, g.close())
		}
	}()
	if g.store, err = filestore.Open(dir+"/stuck", nil); err != nil {
		return nil, err
	}
	// Hooks must not block: a full channel drops the event.
	report := func(ch chan ordered.Event) func(ordered.Event) {
		return func(e ordered.Event) {
			select {
			case ch <- e:
			default:
			}
		}
	}
	opts := &ordered.Options{
		Name:    "demo-stuck",
		Logger:  logger(c),
		Send:    ordered.SendOptions{Mode: ordered.SendFast},
		Receive: ordered.ReceiveOptions{GapPolicy: ordered.GapWait, GapTimeout: c.gapTimeout, Wait: time.Second},
		Hooks:   ordered.Hooks{OnGap: report(g.gaps), OnLate: report(g.late)},
	}
	if c.metrics {
		if g.meters, err = instrument(opts); err != nil {
			return nil, err
		}
	}
	if g.q, err = ordered.New(ctx, g.lossy, g.store, opts); err != nil {
		return nil, err
	}
	if g.meters != nil {
		if err := g.meters.observe(g.q); err != nil {
			return nil, err
		}
	}
	repairable := c.hold > 0 && c.page.url != "" && c.page.loopback
	if repairable {
		c.page.show(g.q, ordered.StatusOptions{Repair: true})
	} else {
		c.page.show(g.q)
	}

	// The sender: seq 1 goes, seq 2's send is lost, 3 and 4 go.
	send := func(body string) error { return g.q.Send(ctx, stuckGroupName, []byte(body)) }
	if err := send("debit 10"); err != nil {
		return nil, err
	}
	g.lossy.loseNext()
	lostErr := send("debit 20")
	if !errors.Is(lostErr, errLost) {
		return nil, fmt.Errorf("the lost send of seq 2 returned %v, want %v", lostErr, errLost)
	}
	if err := errors.Join(send("debit 30"), send("debit 40")); err != nil {
		return nil, err
	}
	fmt.Fprintln(c.out, "sender (SendFast): seq 1 sent")
	fmt.Fprintf(c.out, "sender: seq 2 failed: %v\n", lostErr)
	fmt.Fprintln(c.out, "sender: seqs 3 and 4 sent; fast mode journals nothing to send seq 2 again: a hole")

	start := time.Now()
	if err := g.receive(ctx, c, false); err != nil {
		return nil, err
	}
	var gap ordered.Event
	select {
	case gap = <-g.gaps:
	case <-ctx.Done():
		return nil, fmt.Errorf("no gap reported: %w", ctx.Err())
	}
	missing := fmt.Sprint(gap.Seq)
	if gap.Last > gap.Seq {
		missing += fmt.Sprintf("..%d", gap.Last)
	}
	fmt.Fprintf(c.out, "Hooks.OnGap after %v: group %s misses seq %s (hole %v old, GapTimeout %v)\n",
		time.Since(start).Round(10*time.Millisecond), gap.Group, missing, gap.Age.Round(10*time.Millisecond), c.gapTimeout)
	for _, s := range g.q.Stats().Receive.Stuck {
		fmt.Fprintf(c.out, "Stats().Receive.Stuck: group %s, cause %s, since %s (%v ago)\n",
			s.Group, s.Reason, s.Since.Format("15:04:05.000"), time.Since(s.Since).Round(10*time.Millisecond))
	}
	if g.meters != nil {
		if err := g.meters.stuckGauge(ctx, c.out, "gap"); err != nil {
			return nil, err
		}
	}
	groupURL := ""
	if c.page.url != "" {
		groupURL = c.page.url + "?group=" + url.QueryEscape(stuckGroupName)
		fmt.Fprintf(c.out, "status page of the group: %s\n", groupURL)
	}

	if c.hold > 0 {
		g.held = true
		switch {
		case repairable:
			origin := "http://" + hostOf(c.page.url)
			fmt.Fprintf(c.out, "-hold: %s stays stuck; repair it on the page (Skip hole), or:\n", stuckGroupName)
			fmt.Fprintf(c.out, "   curl -s '%s&format=json'\n", groupURL)
			fmt.Fprintf(c.out, "   curl -s -H 'Origin: %s' -d repair=skip-hole -d group=%s '%s?format=json'\n",
				origin, url.QueryEscape(stuckGroupName), c.page.url)
		case c.page.url != "":
			fmt.Fprintf(c.out, "-hold: %s stays stuck; the page repairs only on a loopback -status\n", stuckGroupName)
		default:
			fmt.Fprintf(c.out, "-hold: %s stays stuck (-status off: no page to repair it)\n", stuckGroupName)
		}
		return g, nil
	}
	if err := g.q.SkipHole(ctx, stuckGroupName); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "repair: q.SkipHole(ctx, %q): seq 2 recorded as skipped in the group's cursor\n", stuckGroupName)
	return nil, g.finish(ctx, c)
}

// hostOf returns the host:port of an http URL.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// receive receives, prints and acks one message of the group.
func (g *stuckGroup) receive(ctx context.Context, c config, wantUnordered bool) error {
	m, err := g.q.Receive(ctx)
	if err != nil {
		return err
	}
	note := ""
	if m.Unordered {
		note = ", Unordered: a late arrival"
	}
	fmt.Fprintf(c.out, "receive message body is %s (seq %d%s)\n", m.Body, m.Seq, note)
	if m.Unordered != wantUnordered {
		return errors.Join(fmt.Errorf("seq %d: Unordered %v, want %v", m.Seq, m.Unordered, wantUnordered), m.Ack(ctx))
	}
	return m.Ack(ctx)
}

// finish receives what follows the repair: seqs 3 and 4, then the lost
// seq 2, delivered now, flagged Unordered. Under -hold it waits for the
// repair on the page first.
func (g *stuckGroup) finish(ctx context.Context, c config) error {
	gauge := func() error {
		if g.meters == nil {
			return nil
		}
		return g.meters.stuckGauge(ctx, c.out, "gap")
	}
	if g.held {
		// The first Receive returns once the page repaired the group.
		m, err := g.q.Receive(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "\n%s repaired on the status page; what follows:\n", stuckGroupName)
		if err := gauge(); err != nil {
			return errors.Join(err, m.Ack(ctx))
		}
		fmt.Fprintf(c.out, "receive message body is %s (seq %d)\n", m.Body, m.Seq)
		if err := m.Ack(ctx); err != nil {
			return err
		}
	} else {
		if err := gauge(); err != nil {
			return err
		}
		if err := g.receive(ctx, c, false); err != nil {
			return err
		}
	}
	if err := g.receive(ctx, c, false); err != nil {
		return err
	}
	if err := g.lossy.deliverLost(ctx); err != nil {
		return err
	}
	fmt.Fprintln(c.out, "the lost send of seq 2 reaches the queue now:")
	if err := g.receive(ctx, c, true); err != nil {
		return err
	}
	select {
	case e := <-g.late:
		fmt.Fprintf(c.out, "Hooks.OnLate: group %s, seq %d (skipped, so handed out Unordered)\n", e.Group, e.Seq)
	case <-time.After(time.Second):
		// Hooks run on their own goroutine: it may not have come yet.
	}
	return nil
}

// close closes what stuck opened.
func (g *stuckGroup) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if g.q != nil {
		err = g.q.Close(ctx)
	}
	if g.meters != nil {
		g.meters.close()
	}
	if g.store != nil {
		err = errors.Join(err, g.store.Close())
	}
	return errors.Join(err, g.drv.Close())
}
