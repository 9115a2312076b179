package crashtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kinds of Event.
const (
	// KindStart opens an incarnation's file: Role and Mode are set.
	KindStart = "start"
	// KindAttempt is written (and fsynced) by a sender before Payload is
	// admitted to Send: every message that can reach the queue has one.
	KindAttempt = "attempt"
	// KindSent is written after Send returned nil for Payload, with the
	// Epoch and Seq it was given.
	KindSent = "sent"
	// KindFailed is written after Send returned an error for Payload; in
	// durable mode the message may still be delivered (recovery).
	KindFailed = "failed"
	// KindDelivered is written (and fsynced) by a receiver when the Queue
	// handed it a message, before the message is acknowledged.
	KindDelivered = "delivered"
	// KindAcked is written after Ack returned nil; Durable says whether the
	// cursor advance was durable when Ack returned (SyncAck).
	KindAcked = "acked"
	// KindCommitted is written after the application's transaction that
	// applied the message and advanced the cursor committed (ExactlyOnce),
	// or derived from the application's table at the end of a run.
	KindCommitted = "committed"
	// KindDurable is written by a receiver when the store returned the
	// cursor of Group (Cursor) or stored it (Advance returned nil): Epoch
	// and Seq are the cursor's epoch and next seq, and every seq below is
	// durably handled.
	KindDurable = "durable"
	// KindDelete is written (before the request) by a receiver for each
	// tagged message it is about to delete from the queue.
	KindDelete = "delete"
	// KindParked is written by a receiver when the store's Park returned
	// nil, or its Unpark returned the entry: the message Group, Epoch, Seq
	// is durably parked (and a queue copy of it may then be deleted
	// although the cursor has not passed it).
	KindParked = "parked"
	// KindEnd closes an incarnation that stopped cleanly: Close returned
	// nil, so everything acknowledged is durable.
	KindEnd = "end"
)

// Kinds of Event in the scale-out harness (TestScaleOut, CheckScaleOut).
// Every scale-out event carries T, the wall clock in Unix nanoseconds when
// it was written: the processes share one host and its clock, so the
// checker orders events of different processes by T.
const (
	// KindAcquire, KindRevoke, KindDrained and KindFence are a scale-out
	// receiver's lease changes (scaleout.Options.OnChange: start, revoke,
	// drained, fence), with Shard and Token.
	KindAcquire = "acquire"
	KindRevoke  = "revoke"
	KindDrained = "drained"
	KindFence   = "fence"
	// KindDone is written by a scale-out receiver's handler when it has
	// done its work, just before it returns nil (Run then acknowledges):
	// a KindDelivered (written first thing in the handler) and its
	// KindDone bound a delivery.
	KindDone = "done"
	// KindClaim is written when the store accepted a write that raised a
	// cursor's owner token to Token (seqstore.Claim); KindCommit when it
	// accepted an advance of the cursor to Seq (the next seq) by Token. T0
	// is when the call began, T when it returned.
	KindClaim  = "claim"
	KindCommit = "commit"
	// KindOps is written every few seconds by a scale-out receiver: Seq is
	// the number of store calls it made so far (lease calls included).
	KindOps = "ops"
	// Faults, written by the harness (RoleHarness) about the incarnation
	// Target/TInc: KindKill (SIGKILL sent), KindStop (SIGSTOP sent),
	// KindCont (SIGCONT sent), KindTerm (SIGTERM sent), KindExit (the
	// process exited), KindCut and KindHeal (its store connection black-
	// holed and restored), KindJoin (a member started that was not running).
	KindKill = "kill"
	KindStop = "stop"
	KindCont = "cont"
	KindTerm = "term"
	KindExit = "exit"
	KindCut  = "cut"
	KindHeal = "heal"
	KindJoin = "join"
)

// Roles of a process.
const (
	RoleSend    = "send"
	RoleReceive = "recv"
	// RoleDB marks events derived from the application's own table.
	RoleDB = "db"
	// RoleScaleSend and RoleScaleRecv are the scale-out harness's sender
	// and receiver processes; RoleHarness marks the faults the harness
	// injected.
	RoleScaleSend = "ssend"
	RoleScaleRecv = "srecv"
	RoleHarness   = "harness"
)

// Event is one line of a history file.
type Event struct {
	Proc      string `json:"p"`
	Inc       int    `json:"i"`
	Role      string `json:"r"`
	Kind      string `json:"k"`
	Mode      string `json:"m,omitempty"`
	Group     string `json:"g,omitempty"`
	Epoch     uint64 `json:"e,omitempty"`
	Seq       uint64 `json:"s,omitempty"`
	Payload   string `json:"id,omitempty"`
	Durable   bool   `json:"d,omitempty"`
	Unordered bool   `json:"u,omitempty"`
	Err       string `json:"err,omitempty"`
	// Scale-out events (TestScaleOut): the shard and fencing token of a
	// lease, a delivery or a store write; the time it was written (T) and,
	// for a store write, when the call began (T0), in Unix nanoseconds;
	// and, for a fault, the incarnation it hit.
	Shard  int    `json:"sh,omitempty"`
	Token  uint64 `json:"tk,omitempty"`
	T      int64  `json:"t,omitempty"`
	T0     int64  `json:"t0,omitempty"`
	Target string `json:"tg,omitempty"`
	TInc   int    `json:"ti,omitempty"`

	// File and Line locate the event; they are set by Parse, not stored.
	File string `json:"-"`
	Line int    `json:"-"`
}

// Pos returns "file:line" of the event.
func (e *Event) Pos() string { return fmt.Sprintf("%s:%d", e.File, e.Line) }

// String describes the event for a violation report.
func (e *Event) String() string {
	s := fmt.Sprintf("%s %s/%d %s", e.Kind, e.Proc, e.Inc, e.Role)
	if e.Group != "" || e.Seq != 0 {
		s += fmt.Sprintf(" group %q epoch %d seq %d", e.Group, e.Epoch, e.Seq)
	}
	if e.Payload != "" {
		s += " payload " + e.Payload
	}
	return s
}

// History is the events of one incarnation of one process, in file order.
type History struct {
	File   string
	Proc   string
	Inc    int
	Role   string
	Mode   string
	Events []Event
	// Torn reports that the last line was cut short (a SIGKILL during the
	// write) and was ignored.
	Torn bool
	// Clean reports that the incarnation ended with KindEnd.
	Clean bool
}

// ErrMalformed means a history file holds a line that is not a valid event
// somewhere other than at a torn tail, or events of several incarnations.
var ErrMalformed = errors.New("crashtest: malformed history")

// Parse reads one history file. A last line without its newline that does
// not parse is a torn tail and is ignored (History.Torn); any other bad line
// is an error wrapping ErrMalformed. Every event must carry the Proc, Inc and
// Role of the first.
func Parse(name string, r io.Reader) (*History, error) {
	h := &History{File: name}
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: %s:%d: line longer than %d bytes", ErrMalformed, name, line, 64<<10)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("crashtest: read %s: %w", name, err)
		}
		eof := err != nil
		if eof && len(b) == 0 {
			break
		}
		var ev Event
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(&ev); derr != nil || ev.Kind == "" || ev.Proc == "" || !isKind(ev.Kind) {
			if eof {
				h.Torn = true // no newline: the write was cut short
				break
			}
			return nil, fmt.Errorf("%w: %s:%d: bad event %q (%v)", ErrMalformed, name, line, truncate(b, 80), derr)
		}
		if eof {
			// A complete event without its newline is still a torn write:
			// the newline goes out in the same write.
			h.Torn = true
			break
		}
		ev.File, ev.Line = name, line
		if len(h.Events) == 0 {
			h.Proc, h.Inc, h.Role, h.Mode = ev.Proc, ev.Inc, ev.Role, ev.Mode
		} else if ev.Proc != h.Proc || ev.Inc != h.Inc || ev.Role != h.Role {
			return nil, fmt.Errorf("%w: %s:%d: event of %s/%d %s in a file of %s/%d %s",
				ErrMalformed, name, line, ev.Proc, ev.Inc, ev.Role, h.Proc, h.Inc, h.Role)
		}
		if ev.Kind == KindEnd {
			h.Clean = true
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}

func isKind(k string) bool {
	switch k {
	case KindStart, KindAttempt, KindSent, KindFailed, KindDelivered, KindAcked, KindCommitted, KindDurable, KindDelete, KindParked, KindEnd,
		KindAcquire, KindRevoke, KindDrained, KindFence, KindDone, KindClaim, KindCommit, KindOps,
		KindKill, KindStop, KindCont, KindTerm, KindExit, KindCut, KindHeal, KindJoin:
		return true
	}
	return false
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return strings.TrimRight(string(b), "\n")
}

// Load parses every *.jsonl file in dir and returns the histories sorted by
// process and incarnation. Empty files (a process killed before its first
// write) are skipped.
func Load(dir string) ([]*History, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("crashtest: %w", err)
	}
	var hs []*History
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("crashtest: %w", err)
		}
		h, err := Parse(filepath.Base(name), f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if len(h.Events) > 0 {
			hs = append(hs, h)
		}
	}
	SortHistories(hs)
	return hs, nil
}

// SortHistories orders histories by process, then incarnation.
func SortHistories(hs []*History) {
	sort.SliceStable(hs, func(i, j int) bool {
		if hs[i].Proc != hs[j].Proc {
			return hs[i].Proc < hs[j].Proc
		}
		return hs[i].Inc < hs[j].Inc
	})
}
