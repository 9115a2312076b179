package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// floorWork is what ordering cannot do without, added to a raw run to make
// a floor row (floor/<driver>/<store>/g<groups>): each message carries the
// envelope header the sender writes (epoch 1, its seq in its group), encoded
// at send with envelope.Append into a buffer made before the run, as the raw
// row's payloads are; each receive decodes it (envelope.ParseRaw, as the
// receiver does) and checks it against the payload's stamp; and each
// received batch ends with one store Advance, before its delete, moving the
// cursor of every group in the batch with a correct compare-and-set. No
// reservation, journal, buffering, reordering, reaper or commit timer.
//
// Each consumer writes the cursors of its own streams (queue floor-...-c<i>),
// so that its From is always the cursor it wrote last: the two receive
// loops of a raw run never contend on one stream, as the receiver's single
// committer does not. The cursor written is the highest seq of the group the
// consumer received, plus one: without ordering nothing says the seqs below
// were handled, so it is the write's cost the row measures, not its meaning.
type floorWork struct {
	store  seqstore.Store
	queue  string
	groups int
	names  []string
	// bodies holds every message's envelope, slot bytes each.
	bodies []byte
	slot   int

	advances, moves atomic.Int64 // Advance calls, and cursors they moved
}

// newFloorWork prepares the floor of n messages of size bytes over groups,
// writing cursors to st under streams of queue.
func newFloorWork(st seqstore.Store, queue string, n, groups, size int) *floorWork {
	w := &floorWork{store: st, queue: queue, groups: groups, names: make([]string, groups)}
	for g := range w.names {
		w.names[g] = groupName(g)
	}
	// The longest header: the last group's name (every name is as long)
	// and the highest seq.
	last := envelope.Header{Group: w.names[groups-1], Epoch: 1, Seq: uint64((max(n, 1)-1)/groups) + 1}
	w.slot = envelope.HeaderLen(last) + size
	w.bodies = make([]byte, n*w.slot)
	return w
}

// seq is message id's seq in its group: ids go round-robin over the
// groups, so group id%groups gets seqs 1, 2, 3... in id order.
func (w *floorWork) seq(id uint64) uint64 { return id/uint64(w.groups) + 1 }

// encode returns message id's body: its header and payload, in its slot.
func (w *floorWork) encode(id, g int, payload []byte) []byte {
	slot := w.bodies[id*w.slot : id*w.slot : (id+1)*w.slot]
	return envelope.Append(slot, envelope.Header{Group: w.names[g], Epoch: 1, Seq: w.seq(uint64(id))}, payload)
}

// consumer returns receive loop i's state.
func (w *floorWork) consumer(i int) *floorConsumer {
	fc := &floorConsumer{
		w:       w,
		streams: make([]seqstore.Stream, w.groups),
		cursors: make([]seqstore.Cursor, w.groups),
		high:    make([]uint64, w.groups),
		inBatch: make([]bool, w.groups),
		batch:   make([]seqstore.Advance, 0, 16),
	}
	queue := fmt.Sprintf("%s-c%d", w.queue, i)
	for g := range fc.streams {
		fc.streams[g] = seqstore.Stream{Queue: queue, Group: w.names[g]}
	}
	return fc
}

// floorConsumer is one receive loop's view of its cursors.
type floorConsumer struct {
	w       *floorWork
	streams []seqstore.Stream // per group
	cursors []seqstore.Cursor // per group: as last written
	high    []uint64          // per group: the highest seq received
	inBatch []bool            // per group: in touched
	touched []int             // the groups of the batch being received
	batch   []seqstore.Advance
	buf     [envelope.MaxGroupLen]byte
}

var errFloorHeader = errors.New("floor: a body's header does not decode to its message's group and seq")

// decode parses body's header, checks it names the group and seq the
// message was sent with (its stamp says which), and returns the payload.
func (fc *floorConsumer) decode(body []byte) ([]byte, error) {
	h, group, payload, ok := envelope.ParseRaw(body, &fc.buf)
	if !ok {
		return nil, fmt.Errorf("%w: no valid header (%d bytes)", errFloorHeader, len(body))
	}
	s, ok := readStamp(payload)
	if !ok || int(s.group) >= fc.w.groups || string(group) != fc.w.names[s.group] || h.Epoch != 1 || h.Seq != fc.w.seq(s.id) {
		return nil, fmt.Errorf("%w: message %d has header %d;%d;%q", errFloorHeader, s.id, h.Epoch, h.Seq, group)
	}
	g := int(s.group)
	if !fc.inBatch[g] {
		fc.inBatch[g] = true
		fc.touched = append(fc.touched, g)
	}
	fc.high[g] = max(fc.high[g], h.Seq)
	return payload, nil
}

// commit writes, in one Advance, the cursor of every group of the batch
// received since the last commit, from the cursor written last.
func (fc *floorConsumer) commit(ctx context.Context) error {
	if len(fc.touched) == 0 {
		return nil
	}
	fc.batch = fc.batch[:0]
	for _, g := range fc.touched {
		from := fc.cursors[g]
		to := seqstore.Cursor{Epoch: 1, Next: max(from.Next, fc.high[g]+1)}
		fc.batch = append(fc.batch, seqstore.Advance{Stream: fc.streams[g], From: from, To: to})
	}
	fc.w.advances.Add(1)
	fc.w.moves.Add(int64(len(fc.batch)))
	err := fc.w.store.Advance(ctx, fc.batch)
	for i, g := range fc.touched {
		if err == nil {
			fc.cursors[g] = fc.batch[i].To
		}
		fc.inBatch[g] = false
	}
	fc.touched = fc.touched[:0]
	return err
}

// runFloor is a raw run over fr's driver with floorWork over fr's store.
func runFloor(ctx context.Context, c *config, e *environment, fr floorRun) (*result, error) {
	ost, err := fr.store.open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer ost.close()
	fw := newFloorWork(ost.s, e.name("floor"), fr.n, fr.groups, c.size)
	r, err := runRaw(ctx, c, e, rawRun{driver: fr.driver, groups: fr.groups, n: fr.n, floor: fw})
	if err != nil {
		return nil, err
	}
	n := float64(r.Messages)
	r.StoreOpsPerMsg = float64(fw.advances.Load()) / n
	note := fmt.Sprintf("header encoded and decoded per msg, one Advance per received batch: %d calls, %.2f cursors each",
		fw.advances.Load(), float64(fw.moves.Load())/float64(max(fw.advances.Load(), 1)))
	if r.Notes != "" {
		note += ", " + r.Notes
	}
	r.Notes = note
	return r, nil
}

// floorRun describes a floor row.
type floorRun struct {
	driver driverKind
	store  storeKind
	groups int
	n      int
}
