package ordered

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// windowModel is what the sender knows about one group's messages, kept
// independently of sendWindow: the state of each position.
type windowModel struct {
	limit    uint64
	state    []posState
	released uint64 // positions below were released, in order
	retrying map[uint64]bool
}

type posState uint8

const (
	posHeld posState = iota
	posInFlight
	posFinished
)

// oldestUnfinished is the lowest position not finished (len(state) if none).
func (m *windowModel) oldestUnfinished() uint64 {
	for p, s := range m.state {
		if s != posFinished {
			return uint64(p)
		}
	}
	return uint64(len(m.state))
}

func (m *windowModel) inFlight() []uint64 {
	var out []uint64
	for p := uint64(0); p < m.released; p++ {
		if m.state[p] == posInFlight {
			out = append(out, p)
		}
	}
	return out
}

// release applies what sendWindow.release returned: n more positions, in
// order.
func (m *windowModel) release(t *rapid.T, n int) {
	for range n {
		if m.released >= uint64(len(m.state)) {
			t.Fatalf("released position %d, but only %d are reserved", m.released, len(m.state))
		}
		if m.state[m.released] != posHeld {
			t.Fatalf("released position %d twice", m.released)
		}
		m.state[m.released] = posInFlight
		m.released++
	}
}

// check asserts the window's invariants against the model after a step.
func (m *windowModel) check(t *rapid.T, w *sendWindow, step string) {
	oldest := m.oldestUnfinished()
	held := uint64(len(m.state)) - m.released
	if m.released > oldest && m.released-1-oldest > m.limit {
		t.Fatalf("%s: position %d released while %d is unfinished: distance %d > MaxDisorder %d",
			step, m.released-1, oldest, m.released-1-oldest, m.limit)
	}
	for p := range m.retrying {
		if m.released > p && m.released-1-p > m.limit {
			t.Fatalf("%s: position %d released while %d is being retried: the retry lost its place (MaxDisorder %d)",
				step, m.released-1, p, m.limit)
		}
	}
	// Maximal: a held position is released as soon as the bound allows
	// (which also means no deadlock: something is in flight while
	// anything is held).
	if held > 0 && m.released-oldest <= m.limit {
		t.Fatalf("%s: position %d held although the oldest unfinished is %d (MaxDisorder %d): %d held, %d in flight",
			step, m.released, oldest, m.limit, held, len(m.inFlight()))
	}
	if got := w.held(); got != int(held) {
		t.Fatalf("%s: held() = %d, want %d", step, got, held)
	}
	if got, want := w.idle(), oldest == uint64(len(m.state)); got != want {
		t.Fatalf("%s: idle() = %v, want %v", step, got, want)
	}
}

// TestSendWindowProperties drives sendWindow as the sender does (reserve
// runs, release what it allows, finish in-flight positions in any order,
// retry some of them for a while, reset it once idle) and checks after
// every step, against a model that tracks each position:
//
//   - bound: newest released - oldest unfinished <= MaxDisorder;
//   - retries keep their place: nothing more than MaxDisorder past a
//     position being retried is released;
//   - maximal release: nothing is held that the bound allows, so something
//     is in flight whenever anything is held;
//   - no deadlock: finishing what is in flight eventually releases and
//     finishes everything reserved.
func TestSendWindowProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// Small limits exercise the bound; larger ones the ring's growth
		// past one word and its wrap-around.
		limit := uint64(rapid.OneOf(rapid.IntRange(1, 6), rapid.IntRange(60, 300)).Draw(rt, "limit"))
		w := &sendWindow{limit: limit}
		m := &windowModel{limit: limit, retrying: map[uint64]bool{}}
		steps := rapid.IntRange(1, 300).Draw(rt, "steps")
		for i := range steps {
			var step string
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 3: // reserve a run and release what the bound allows
				n := rapid.IntRange(1, int(2*limit)+3).Draw(rt, "n")
				first := w.reserve(n)
				if first != uint64(len(m.state)) {
					rt.Fatalf("reserve(%d) = %d, want %d", n, first, len(m.state))
				}
				for range n {
					m.state = append(m.state, posHeld)
				}
				m.release(rt, w.release())
				step = fmt.Sprintf("step %d: reserve %d at %d", i, n, first)
			case op < 4: // a position fails an attempt: it is retried, unfinished
				fl := m.inFlight()
				if len(fl) == 0 {
					continue
				}
				p := fl[rapid.IntRange(0, len(fl)-1).Draw(rt, "retry")]
				m.retrying[p] = true
				step = fmt.Sprintf("step %d: retry %d", i, p)
			case op < 9: // a position finishes (accepted, or failed for good)
				fl := m.inFlight()
				if len(fl) == 0 {
					continue
				}
				p := fl[rapid.IntRange(0, len(fl)-1).Draw(rt, "finish")]
				if m.retrying[p] && rapid.Bool().Draw(rt, "keep retrying") {
					continue
				}
				delete(m.retrying, p)
				m.state[p] = posFinished
				if w.finish(p) {
					m.release(rt, w.release())
				}
				step = fmt.Sprintf("step %d: finish %d", i, p)
			default: // reuse for a new group once idle, as evictLocked does
				if !w.idle() {
					continue
				}
				w.reset(limit)
				*m = windowModel{limit: limit, retrying: map[uint64]bool{}}
				step = fmt.Sprintf("step %d: reset", i)
			}
			m.check(rt, w, step)
		}
		// No deadlock: finishing whatever is in flight, oldest first or
		// newest first, finishes everything.
		newestFirst := rapid.Bool().Draw(rt, "drain newest first")
		for range len(m.state) + 1 {
			fl := m.inFlight()
			if len(fl) == 0 {
				break
			}
			p := fl[0]
			if newestFirst {
				p = fl[len(fl)-1]
			}
			delete(m.retrying, p)
			m.state[p] = posFinished
			if w.finish(p) {
				m.release(rt, w.release())
			}
			m.check(rt, w, fmt.Sprintf("drain: finish %d", p))
		}
		if held := uint64(len(m.state)) - m.released; held > 0 || !w.idle() {
			rt.Fatalf("deadlock: %d of %d positions still held, %d in flight, idle() %v", held, len(m.state), len(m.inFlight()), w.idle())
		}
	})
}

// TestSendWindowBoundExact spells the bound out on one case: MaxDisorder 2
// lets positions 0..2 go, holds 3 until 0 finishes, and a retried 0 keeps
// 3 waiting however many later ones finish.
func TestSendWindowBoundExact(t *testing.T) {
	w := &sendWindow{limit: 2}
	require.Equal(t, uint64(0), w.reserve(6))
	require.Equal(t, 3, w.release(), "positions 0, 1, 2 go; 2-0 <= 2")
	require.Equal(t, 3, w.held())
	require.False(t, w.finish(2), "2 finished: 0 is still the oldest")
	require.False(t, w.finish(1), "1 finished: 0 (being retried) is still the oldest")
	require.Equal(t, 0, w.release(), "3 waits behind 0")
	require.True(t, w.finish(0), "0 finished: the oldest unfinished is now 3")
	require.Equal(t, 3, w.release(), "3, 4, 5 go")
	require.False(t, w.idle())
	for _, p := range []uint64{5, 3, 4} {
		w.finish(p)
	}
	require.True(t, w.idle())
	require.Equal(t, 0, w.held())
}
