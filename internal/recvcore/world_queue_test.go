package recvcore_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inorder/inorder/internal/recvcore"
)

// This file is the world model's queue: an MNS standard queue as the service
// documents it (reference/mns-sdk.md §12 and "Service throttling rules"),
// written from those rules alone. It shares no code with the Core.
//
//   - A receive makes a visible message invisible for the visibility timeout,
//     gives it a new receipt handle and counts one more dequeue. Every
//     earlier handle of the message goes stale.
//   - ChangeVisibility with the current handle sets the message invisible
//     for the new timeout, counted from the call, and returns a new handle:
//     the one it was called with goes stale.
//   - Delete with the current handle removes the message; a stale handle (an
//     older one, one whose visibility ended, one of a deleted message) is
//     refused (404 MessageNotExist).
//   - The service counts a message as received and not deleted from its
//     receive until it is deleted or its visibility ends; a message held so
//     continuously (extensions included) for longer than the hold limit
//     trips the abnormal-consumption throttle.

// mkey names a message as the application sees it: (group, epoch, seq) for
// a tagged message, the queue message id for an untagged one. Two queue
// messages with one tagged key (a duplicate send) are one message.
type mkey struct {
	group      string
	epoch, seq uint64
	id         string // untagged only
}

func (k mkey) tagged() bool { return k.id == "" }

func (k mkey) String() string {
	if k.id != "" {
		return "untagged:" + k.id
	}
	return fmt.Sprintf("%s/%d/%d", k.group, k.epoch, k.seq)
}

// qMsg is one queue message.
type qMsg struct {
	id   string
	body []byte
	key  mkey

	sent    bool // in the queue (false while the sender holds it back)
	deleted bool

	visibleAt time.Time // invisible until then
	receipt   string    // the only valid handle, while invisible
	dequeue   int

	// Who holds the message: the incarnation whose receive (or
	// ChangeVisibility) made it invisible, and whether that incarnation's
	// Core was told the current handle (a lost response hides it).
	holder    int
	seen      bool
	cvLost    bool      // a ChangeVisibility took effect and its answer was lost: the Core knew the message
	byCV      bool      // the current handle came from a ChangeVisibility whose result the Core was given
	heldSince time.Time // start of the current received-and-not-deleted spell
}

// held reports whether the service counts m as received and not deleted.
func (m *qMsg) held(now time.Time) bool {
	return !m.deleted && !m.heldSince.IsZero() && m.visibleAt.After(now)
}

type mnsQueue struct {
	vt        time.Duration // the queue's visibility timeout
	msgs      []*qMsg
	byID      map[string]*qMsg
	byKey     map[mkey][]*qMsg
	byReceipt map[string]*qMsg // every handle ever issued
	receipts  int
}

func newMNSQueue(vt time.Duration) *mnsQueue {
	return &mnsQueue{vt: vt, byID: map[string]*qMsg{}, byKey: map[mkey][]*qMsg{}, byReceipt: map[string]*qMsg{}}
}

func (q *mnsQueue) add(id string, body []byte, key mkey, sent bool) *qMsg {
	m := &qMsg{id: id, body: body, key: key, sent: sent}
	q.msgs = append(q.msgs, m)
	q.byID[id] = m
	q.byKey[key] = append(q.byKey[key], m)
	return m
}

func (q *mnsQueue) newReceipt(m *qMsg) string {
	q.receipts++
	r := fmt.Sprintf("rh%d", q.receipts)
	q.byReceipt[r] = m
	m.receipt = r
	return r
}

// visible reports whether m can be received now.
func (q *mnsQueue) visible(m *qMsg, now time.Time) bool {
	return m.sent && !m.deleted && !m.visibleAt.After(now)
}

// receive returns up to n visible messages in random order for incarnation
// life. A lost response (lost(m) true) makes the message invisible all the
// same, with a handle nobody was told.
func (q *mnsQueue) receive(now time.Time, n, life int, rng *rand.Rand, lost func(*qMsg) bool) []recvcore.Incoming {
	var vis []*qMsg
	for _, m := range q.msgs {
		if q.visible(m, now) {
			vis = append(vis, m)
		}
	}
	rng.Shuffle(len(vis), func(i, j int) { vis[i], vis[j] = vis[j], vis[i] })
	var in []recvcore.Incoming
	for _, m := range vis[:min(n, len(vis))] {
		r := q.newReceipt(m)
		m.dequeue++
		m.visibleAt = now.Add(q.vt)
		m.holder, m.heldSince, m.byCV, m.cvLost = life, now, false, false
		m.seen = !lost(m)
		if m.seen {
			in = append(in, recvcore.Incoming{Body: m.body, ID: m.id, Receipt: r, DequeueCount: m.dequeue, NextVisible: m.visibleAt})
		}
	}
	return in
}

// valid returns the message whose current handle is receipt, if any.
func (q *mnsQueue) valid(receipt string, now time.Time) (*qMsg, bool) {
	m := q.byReceipt[receipt]
	if m == nil || m.deleted || m.receipt != receipt || !m.visibleAt.After(now) {
		return m, false
	}
	return m, true
}

// remove deletes the message of a valid handle.
func (q *mnsQueue) remove(m *qMsg) {
	m.deleted = true
	m.receipt = ""
}

// changeVisibility applies a ChangeVisibility with a valid handle: the
// message is invisible for timeout from now, under a new handle.
func (q *mnsQueue) changeVisibility(m *qMsg, now time.Time, timeout time.Duration) string {
	m.visibleAt = now.Add(timeout)
	return q.newReceipt(m)
}

// undeleted is the service's count of messages received and not deleted
// that incarnation life holds and whose handle its Core was told, or
// whose ChangeVisibility answer it lost: what the cap promises to bound. A
// receive's lost response is the queue's doing, not the Core's, and a
// message held by an earlier incarnation is out of the new one's reach.
func (q *mnsQueue) undeleted(now time.Time, life int) int {
	n := 0
	for _, m := range q.msgs {
		if m.held(now) && m.holder == life && (m.seen || m.cvLost) {
			n++
		}
	}
	return n
}

// overHold returns a message held received and not deleted for longer than
// limit, if any.
func (q *mnsQueue) overHold(now time.Time, limit time.Duration) *qMsg {
	for _, m := range q.msgs {
		if m.held(now) && now.Sub(m.heldSince) > limit {
			return m
		}
	}
	return nil
}

// present reports whether a copy of key is still in the queue (sent or held
// back by its sender, not deleted).
func (q *mnsQueue) present(key mkey) bool {
	for _, m := range q.byKey[key] {
		if !m.deleted {
			return true
		}
	}
	return false
}
