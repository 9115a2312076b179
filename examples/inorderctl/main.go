// Command inorderctl inspects and repairs the sequence state that inorder
// keeps in a store: the sender's counter and journal (outbox), the
// receiver's cursor and the messages it parked, per stream (group) of a
// queue. It takes the -store of the other examples (INORDER_STORE).
//
//	inorderctl streams -store S -queue Q [-json]
//	inorderctl show -store S -queue Q -group G [-json] [-bodies]
//	inorderctl reset-cursor -write -store S -queue Q -group G -from EPOCH/NEXT -to EPOCH/NEXT [-force] [-drop-parked]
//	inorderctl drop-journal -write -store S -queue Q -group G -seq N
//
// streams lists every stream of the queue that has state: the sender
// counter (epoch and last seq reserved), the cursor (epoch, next seq,
// fencing owner and skipped ranges), the parked messages (count and seq
// ranges) and the journal entries not yet marked sent. show prints one
// stream in detail: parks as ranges with their count and bytes, journal
// entries with their seqs and sizes, and the bodies only with -bodies.
// Both only read: a file store is opened read-only (nothing in its
// directory changes, not even what recovery would repair) and no SQL store
// is migrated. They need a store that can list its streams
// (seqstore.Lister: memstore, filestore, redisstore and sqlstore can).
//
// reset-cursor and drop-journal write, and do nothing without -write.
// reset-cursor moves a cursor forward by compare-and-set: -from must be the
// cursor as streams shows it, so a receiver that moved it meanwhile makes
// the reset fail with a conflict, and nothing is written. The seqs it
// passes over are recorded as skipped, as the gap policy records a hole, so
// that a late arrival of one is reported rather than deleted as a
// duplicate. Stores refuse to move a cursor backwards. A cursor with a
// fencing owner (not 0) is held by a receiver that took a lease on it: the
// reset is refused unless -force, for an owner known to be gone (the owner
// is kept). A reset that passes parked messages is refused unless
// -drop-parked: they were deleted from the queue when they were parked, and
// the store drops what a cursor passed, so they are gone for good.
// drop-journal marks one journal entry sent, so that the sender's recovery
// never sends it. Both first check, read-only, that the store exists: a
// mistyped -store must not become a new store.
//
// A file store is locked by the process that has it open: stop the sender
// or receiver first. A server store can be read while they run.
//
// Exit status: 0 on success and for -h, 2 for a usage error (a bad flag,
// a missing one, an unknown command or store scheme), 1 for anything else:
// a store error, a refusal, a conflict.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inorder/inorder/examples/internal/storeurl"
	"github.com/inorder/inorder/seqstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, openURL)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err on stderr and returns the exit status for it.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "inorderctl:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "inorderctl:", err)
		return 1
	}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// opener opens the store spec names; readOnly asks for a store that writes
// nothing (see storeurl.Options.ReadOnly). close releases what it opened.
type opener func(ctx context.Context, spec string, readOnly bool) (st seqstore.Store, close func() error, err error)

// openURL opens a -store URL with storeurl.
func openURL(ctx context.Context, spec string, readOnly bool) (seqstore.Store, func() error, error) {
	s, err := storeurl.Parse(spec)
	if err != nil {
		return nil, nil, &usageError{fmt.Errorf("-store: %w", err)}
	}
	b, err := s.Open(ctx, &storeurl.Options{ReadOnly: readOnly})
	if errors.Is(err, seqstore.ErrLocked) {
		return nil, nil, fmt.Errorf("%w (a sender or receiver has the store open: stop it, or look at a copy of the directory)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	return b.Store, b.Close, nil
}

const usage = `Usage: inorderctl <command> [flags]

Commands that only read:
  streams       list the streams (groups) of a queue with their state
  show          one stream in detail: cursor, skipped ranges, parks, journal

Commands that write, refused without -write:
  reset-cursor  move a stream's cursor forward, compare-and-set from the cursor shown
  drop-journal  mark a journal entry sent, so that the sender never sends it again

Every command takes -store (env INORDER_STORE): file:DIR, sqlite:FILE,
redis://..., postgres://... or mysql://..., as the other examples take it.
Run inorderctl <command> -h for the flags of a command.
`

// command is one subcommand's flags.
type command struct {
	name    string
	fs      *flag.FlagSet
	store   string
	queue   string
	group   string
	json    bool
	bodies  bool
	write   bool
	force   bool
	drop    bool
	from    string
	to      string
	seq     uint64
	timeout time.Duration
}

func newCommand(name string, stderr io.Writer) *command {
	c := &command{name: name, fs: flag.NewFlagSet("inorderctl "+name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	c.fs.StringVar(&c.store, "store", "", "the store: file:DIR, sqlite:FILE, redis://..., postgres://... or mysql://... (env INORDER_STORE)")
	c.fs.StringVar(&c.queue, "queue", "", "the queue whose streams to look at (required)")
	c.fs.DurationVar(&c.timeout, "timeout", time.Minute, "give up after this long")
	return c
}

func (c *command) groupFlag() {
	c.fs.StringVar(&c.group, "group", "", "the stream's group (default: the default group, whose name is empty)")
}

func (c *command) writeFlag() {
	c.fs.BoolVar(&c.write, "write", false, "do it: without -write the command is refused and writes nothing")
}

// parse parses args and checks what every command needs.
func (c *command) parse(args []string) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	if c.fs.NArg() > 0 {
		return usagef("%s: unexpected arguments %q", c.name, c.fs.Args())
	}
	if c.store == "" {
		// Read here, not as the flag's default, which -h would print with
		// its password.
		c.store = os.Getenv("INORDER_STORE")
	} else if spec, err := storeurl.Parse(c.store); err == nil && spec.HasPassword() {
		fmt.Fprintln(c.fs.Output(), "inorderctl: WARNING: other users of this machine can read the password in -store (ps, /proc); set INORDER_STORE instead")
	}
	if c.store == "" {
		return usagef("%s: -store (or INORDER_STORE) is required", c.name)
	}
	if c.queue == "" {
		return usagef("%s: -queue is required", c.name)
	}
	if err := (seqstore.Stream{Queue: c.queue, Group: c.group}).Validate(); err != nil {
		return usagef("%s: %w", c.name, err)
	}
	if c.timeout <= 0 {
		return usagef("%s: -timeout %v must be positive", c.name, c.timeout)
	}
	return nil
}

func (c *command) stream() seqstore.Stream { return seqstore.Stream{Queue: c.queue, Group: c.group} }

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, open opener) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	name, args := args[0], args[1:]
	c := newCommand(name, stderr)
	var do func(ctx context.Context, c *command, st seqstore.Store, stdout io.Writer) error
	readOnly := true
	switch name {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "streams":
		c.fs.BoolVar(&c.json, "json", false, "print JSON")
		do = listStreams
	case "show":
		c.groupFlag()
		c.fs.BoolVar(&c.json, "json", false, "print JSON")
		c.fs.BoolVar(&c.bodies, "bodies", false, "print the bodies of journal entries and parked messages too")
		do = showStream
	case "reset-cursor":
		c.groupFlag()
		c.writeFlag()
		c.fs.StringVar(&c.from, "from", "", "the cursor as it is, EPOCH/NEXT (as streams shows it; 0/0 for none): the compare of the compare-and-set (required)")
		c.fs.StringVar(&c.to, "to", "", "the cursor to set, EPOCH/NEXT, not behind -from (required)")
		c.fs.BoolVar(&c.force, "force", false, "reset although the cursor has a fencing owner (a receiver whose lease may have ended); the owner is kept")
		c.fs.BoolVar(&c.drop, "drop-parked", false, "reset although the cursor passes parked messages, which are then dropped for good (their queue copies were deleted when they were parked)")
		do, readOnly = resetCursor, false
	case "drop-journal":
		c.groupFlag()
		c.writeFlag()
		c.fs.Uint64Var(&c.seq, "seq", 0, "the seq of the journal entry to mark sent (required)")
		do, readOnly = dropJournal, false
	default:
		fmt.Fprint(stderr, usage)
		return usagef("unknown command %q", name)
	}
	c.fs.Usage = func() {
		fmt.Fprintf(c.fs.Output(), "Usage of inorderctl %s:\n", name)
		c.fs.PrintDefaults()
	}
	if err := c.parse(args); err != nil {
		return err // flag.ErrHelp for -h: the usage went to stderr, a success
	}
	if !readOnly {
		if err := c.checkWrite(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if !readOnly {
		// The store must exist: a mistyped -store must not become a new,
		// empty store (a directory, tables) that the command then writes.
		if err := probe(ctx, c, open); err != nil {
			return err
		}
	}
	st, closeStore, err := open(ctx, c.store, readOnly)
	if err != nil {
		return err
	}
	err = do(ctx, c, st, stdout)
	if cerr := closeStore(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close the store: %w", cerr))
	}
	return err
}

// probe opens the store read-only and reads the cursor of the command's
// stream: it fails where there is no store (no directory, no tables).
func probe(ctx context.Context, c *command, open opener) error {
	st, closeStore, err := open(ctx, c.store, true)
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	if err != nil {
		return fmt.Errorf("no store to write (nothing written): %w", err)
	}
	_, err = st.Cursors(ctx, []seqstore.Stream{c.stream()})
	if cerr := closeStore(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close the store: %w", cerr))
	}
	if err != nil {
		return fmt.Errorf("no store to write (nothing written): %w", err)
	}
	return nil
}

// checkWrite checks the flags of a command that writes: -write, and the
// command's own.
func (c *command) checkWrite() error {
	switch c.name {
	case "reset-cursor":
		if c.from == "" || c.to == "" {
			return usagef("reset-cursor: -from and -to are required")
		}
		if _, err := parseCursor(c.from); err != nil {
			return usagef("reset-cursor: -from: %w", err)
		}
		if _, err := parseCursor(c.to); err != nil {
			return usagef("reset-cursor: -to: %w", err)
		}
	case "drop-journal":
		if c.seq == 0 {
			return usagef("drop-journal: -seq is required (seqs start at 1)")
		}
	}
	if !c.write {
		return fmt.Errorf("%s changes the store and is refused without -write (nothing was written)", c.name)
	}
	return nil
}

// parseCursor parses EPOCH/NEXT.
func parseCursor(v string) (seqstore.Cursor, error) {
	e, n, ok := strings.Cut(v, "/")
	if !ok {
		return seqstore.Cursor{}, fmt.Errorf("%q: want EPOCH/NEXT, such as 1733097600000001/42", v)
	}
	epoch, err1 := strconv.ParseUint(e, 10, 63)
	next, err2 := strconv.ParseUint(n, 10, 63)
	if err := errors.Join(err1, err2); err != nil {
		return seqstore.Cursor{}, fmt.Errorf("%q: want EPOCH/NEXT, two numbers up to %d", v, uint64(seqstore.MaxSeq))
	}
	return seqstore.Cursor{Epoch: epoch, Next: next}, nil
}

// lister returns st's listing capability, or says why there is none.
func lister(st seqstore.Store) (seqstore.Lister, error) {
	l, ok := st.(seqstore.Lister)
	if !ok {
		return nil, fmt.Errorf("this store (%T) cannot list its streams: it does not implement seqstore.Lister", st)
	}
	return l, nil
}

func listStreams(ctx context.Context, c *command, st seqstore.Store, stdout io.Writer) error {
	l, err := lister(st)
	if err != nil {
		return err
	}
	states, err := l.Streams(ctx, c.queue)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, listJSON{Queue: c.queue, Streams: streamsJSON(states)})
	}
	printTable(stdout, c.queue, states)
	return nil
}

func showStream(ctx context.Context, c *command, st seqstore.Store, stdout io.Writer) error {
	l, err := lister(st)
	if err != nil {
		return err
	}
	s, err := l.State(ctx, c.stream())
	if err != nil {
		return err
	}
	d := detail{StreamState: s}
	if c.bodies {
		if d.journal, err = journalBodies(ctx, st, s); err != nil {
			return err
		}
		if d.parked, err = parkedBodies(ctx, st, s); err != nil {
			return err
		}
	}
	if c.json {
		return printJSON(stdout, detailJSON(d))
	}
	printDetail(stdout, d, c.bodies)
	return nil
}

// journalBodies reads the journal bodies of s with Pending, by seq.
func journalBodies(ctx context.Context, st seqstore.Store, s seqstore.StreamState) (map[uint64][]byte, error) {
	if len(s.Journal) == 0 {
		return nil, nil
	}
	es, err := st.Pending(ctx, s.Stream.Queue)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64][]byte)
	for _, e := range es {
		if e.Stream == s.Stream {
			out[e.Seq] = e.Body
		}
	}
	return out, nil
}

// parkedBodies reads the parked bodies of s with Unpark, one query per
// span, by epoch and seq.
func parkedBodies(ctx context.Context, st seqstore.Store, s seqstore.StreamState) (map[[2]uint64][]byte, error) {
	spans := spansOf(s.Parked)
	if len(spans) == 0 {
		return nil, nil
	}
	qs := make([]seqstore.ParkQuery, len(spans))
	for i, sp := range spans {
		qs[i] = seqstore.ParkQuery{Stream: s.Stream, Epoch: sp.Epoch, From: sp.First, Max: int(sp.Count())}
	}
	got, err := st.Unpark(ctx, qs)
	if err != nil {
		return nil, err
	}
	out := make(map[[2]uint64][]byte)
	for _, ps := range got {
		for _, p := range ps {
			out[[2]uint64{p.Epoch, p.Seq}] = p.Body
		}
	}
	return out, nil
}

func resetCursor(ctx context.Context, c *command, st seqstore.Store, stdout io.Writer) error {
	from, _ := parseCursor(c.from)
	to, _ := parseCursor(c.to)
	s := c.stream()
	cs, err := st.Cursors(ctx, []seqstore.Stream{s})
	if err != nil {
		return err
	}
	cur := cs[0]
	if cur.Epoch != from.Epoch || cur.Next != from.Next {
		return fmt.Errorf("conflict: the cursor of %s is %d/%d, not %d/%d as -from says (a receiver moved it?): nothing written; look again with show",
			s, cur.Epoch, cur.Next, from.Epoch, from.Next)
	}
	if cur.Owner != 0 && !c.force {
		return fmt.Errorf("refused: the cursor of %s has fencing owner %d: a receiver holds a lease on the stream, and its next advance "+
			"would conflict with the reset. Stop it first; if it is gone for good, add -force (the owner is kept): nothing written", s, cur.Owner)
	}
	to.Owner = cur.Owner
	if to.Skipped, err = skipAfterReset(cur, to); err != nil {
		return fmt.Errorf("refused: %w: nothing written", err)
	}
	passed, err := passedParks(ctx, st, s, cur, to)
	if err != nil {
		return err
	}
	lost := ""
	if len(passed) > 0 {
		lost = fmt.Sprintf("%s (%s)", plural(len(passed), "parked message"), formatRanges(spanRanges(spansOf(passed)), to.Epoch, tableRanges))
		if !c.drop {
			return fmt.Errorf("refused: the reset passes %s of %s: they were deleted from the queue when they were parked, "+
				"and the reset drops them for good. Add -drop-parked to do it anyway: nothing written", lost, s)
		}
	}
	err = st.Advance(ctx, []seqstore.Advance{{Stream: s, From: cur, To: to}})
	switch {
	case errors.Is(err, seqstore.ErrConflict):
		return fmt.Errorf("conflict: the cursor of %s moved between the read and the compare-and-set (a receiver is running?): nothing written: %w", s, err)
	case errors.Is(err, seqstore.ErrInvalidArgument):
		return fmt.Errorf("refused by the store: %w", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "cursor of %s: %d/%d -> %d/%d", s, cur.Epoch, cur.Next, to.Epoch, to.Next)
	if !sameRanges(to.Skipped, cur.Skipped) {
		fmt.Fprintf(stdout, ", skipped %s", formatRanges(to.Skipped, to.Epoch, 0))
	}
	if lost != "" {
		fmt.Fprintf(stdout, ", dropped %s", lost)
	}
	fmt.Fprintln(stdout)
	return nil
}

// passedParks returns the parked entries of s that a move of its cursor
// from cur to to passes: those to has handled (Cursor.Below) and cur has
// not. Without seqstore.Lister it asks Unpark about cur's and to's epochs
// only.
func passedParks(ctx context.Context, st seqstore.Store, s seqstore.Stream, cur, to seqstore.Cursor) ([]seqstore.EntryInfo, error) {
	var parked []seqstore.EntryInfo
	if l, ok := st.(seqstore.Lister); ok {
		state, err := l.State(ctx, s)
		if err != nil {
			return nil, err
		}
		parked = state.Parked
	} else {
		qs := []seqstore.ParkQuery{{Stream: s, Epoch: cur.Epoch, From: cur.Next, Max: 1 << 20}}
		if to.Epoch != cur.Epoch {
			qs = append(qs, seqstore.ParkQuery{Stream: s, Epoch: to.Epoch, From: 1, Max: 1 << 20})
		}
		got, err := st.Unpark(ctx, qs)
		if err != nil {
			return nil, err
		}
		for _, ps := range got {
			for _, p := range ps {
				parked = append(parked, seqstore.EntryInfo{Epoch: p.Epoch, Seq: p.Seq, Size: len(p.Body)})
			}
		}
	}
	var out []seqstore.EntryInfo
	for _, e := range parked {
		if to.Below(e.Epoch, e.Seq) && !cur.Below(e.Epoch, e.Seq) {
			out = append(out, e)
		}
	}
	return out, nil
}

// skipAfterReset returns the skipped ranges of a cursor moved from cur to
// to: cur's, with the seqs the move passes over, which no receiver
// handled: the rest of cur's epoch (if to is in a later one) and to's seqs
// below to.Next. Ranges that touch merge; a cursor holds at most
// seqstore.MaxSkipped.
func skipAfterReset(cur, to seqstore.Cursor) ([]seqstore.Range, error) {
	out := append([]seqstore.Range(nil), cur.Skipped...)
	add := func(r seqstore.Range) {
		if r.First > r.Last {
			return
		}
		if n := len(out); n > 0 && out[n-1].Epoch == r.Epoch && out[n-1].Last+1 == r.First {
			out[n-1].Last = r.Last
			return
		}
		out = append(out, r)
	}
	switch {
	case to.Epoch == cur.Epoch:
		add(seqstore.Range{Epoch: to.Epoch, First: max(cur.Next, 1), Last: to.Next - 1})
	case to.Epoch > cur.Epoch:
		if cur.Epoch != 0 {
			add(seqstore.Range{Epoch: cur.Epoch, First: max(cur.Next, 1), Last: seqstore.MaxSeq})
		}
		if to.Next > 1 {
			add(seqstore.Range{Epoch: to.Epoch, First: 1, Last: to.Next - 1})
		}
	}
	if len(out) > seqstore.MaxSkipped {
		return nil, fmt.Errorf("the cursor would hold %d skipped ranges, at most %d", len(out), seqstore.MaxSkipped)
	}
	return out, nil
}

func sameRanges(a, b []seqstore.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dropJournal(ctx context.Context, c *command, st seqstore.Store, stdout io.Writer) error {
	s := c.stream()
	es, err := st.Pending(ctx, c.queue)
	if err != nil {
		return err
	}
	size := -1
	for _, e := range es {
		if e.Stream == s && e.Seq == c.seq {
			size = len(e.Body)
		}
	}
	if size < 0 {
		return fmt.Errorf("%s has no unsent journal entry %d: nothing written", s, c.seq)
	}
	if err := st.Sent(ctx, []seqstore.SentMark{{Stream: s, Seqs: []uint64{c.seq}}}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "journal entry %d of %s (%d bytes) marked sent: the sender will not send it\n", c.seq, s, size)
	return nil
}
