package main

// scaleoutMutants are breaks of scale-out: the fence a shard's Queue sees
// (ordered/scaleout/fence.go), the Receiver's handover (receiver.go), the
// SQL leases and the receive core's keeping of a cursor's Owner, each
// against the test that was seen to catch it.
var scaleoutMutants = []mutant{
	{
		Name:   "scaleout-revoke-cancels-handlers",
		Breaks: "a handover on purpose cancels the handlers' ctx before the Queue closes: ctx-aware handlers are cut off and their messages come again",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.opts.DrainTimeout)` + "\n" + `		err := run.q.Close(ctx)`,
			New:  `		run.cancel()` + "\n" + `		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.opts.DrainTimeout)` + "\n" + `		err := run.q.Close(ctx)`,
		}},
		Pkg: "./ordered/scaleout",
		Run: "^TestReceiversShareShards$",
	},
	{
		Name:   "scaleout-fenced-drain-released",
		Breaks: "a revoke fenced while it drained still reports Drained, which releases the shard's next lease",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `		if fenced {`,
			New:  `		if fenced && false {`,
		}},
		Pkg: "./ordered/scaleout",
		Run: "^TestAttackStaleDrainedReleasesANewerLeaseMidHandler$",
	},
	{
		Name:   "scaleout-fence-closes-at-once",
		Breaks: "a lost shard closes its Queue at once: the messages out to its handlers become visible, and the next owner hands them out mid-handler",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `		case <-time.After(r.opts.DrainTimeout):`,
			New:  `		case <-time.After(0):`,
		}},
		Pkg: "./ordered/scaleout",
		Run: "^TestAttackFencedHandlerOverlapsTheNewOwner$",
	},
	{
		Name:   "scaleout-advance-not-fenced",
		Breaks: "the fence leaves an advance's Owner as the Core gave it: an advance built with Owner 0 un-claims the stream",
		Edits: []edit{{
			File: "ordered/scaleout/fence.go",
			Old:  `		a.From.Owner, a.To.Owner = s.token, s.token`,
			New:  `		a.From.Owner = s.token`,
		}},
		Pkg: "./ordered/scaleout",
		Run: "^TestFencedStoreClaimsAndFences$",
	},
	{
		Name:   "scaleout-park-not-rechecked",
		Breaks: "a stale owner's park is not read back: it lands after the newer owner read the park, and the message is lost",
		Edits: []edit{{
			File: "ordered/scaleout/fence.go",
			Old:  `		if seqstore.Fenced(c, s.token) {` + "\n" + `			err := fmt.Errorf("%w: %s was claimed by token %d while this receiver (token %d) parked"`,
			New:  `		if seqstore.Fenced(c, s.token) && false {` + "\n" + `			err := fmt.Errorf("%w: %s was claimed by token %d while this receiver (token %d) parked"`,
		}},
		Pkg: "./ordered/scaleout",
		Run: "^TestAttackZombieParkIsLostToTheNewOwner$",
	},
	{
		Name:   "sqlstore-acquire-found-row",
		Breaks: "Acquire counts a shard whose live row it found as taken (MySQL's clientFoundRows)",
		Edits: []edit{{
			File: "seqstore/sqlstore/lease.go",
			Old:  `				if rows == 0 { // else a live lease holds the shard`,
			New:  `				if rows >= 0 { // else a live lease holds the shard`,
		}},
		Pkg: "./seqstore/sqlstore",
		Run: "^TestLeaser$",
	},
	{
		Name:   "core-advance-drops-owner",
		Breaks: "the receive core writes a fresh cursor (StartAt) with Owner 0, un-claiming the stream",
		Edits: []edit{{
			File: "internal/recvcore/commits.go",
			Old:  `	a.To.Owner = a.From.Owner // the receiver never changes a cursor's owner (a fencing token: seqstore.Claim)`,
			New:  `	a.To.Owner = 0`,
		}},
		Pkg: "./internal/recvcore",
		Run: "^TestStartAtKeepsTheStoredOwner$",
	},
	{
		Name:   "scaleout-no-deadline-watch",
		Breaks: "a shard whose keeper is held up is not stopped at its lease's local deadline: its handlers' ctx stays alive past it and its Queue keeps what it fetched invisible (review 14's stalled keeper)",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `	r.wg.Go(func() { r.watch(run, k) })`,
			New:  `	_ = r.watch`,
		}},
		Pkg:  "./ordered/scaleout",
		Run:  "^TestStalledKeeperStopsItsShardAtDeadline$",
		Race: true,
	},
	{
		Name:   "fenced-settle-keeps-handout",
		Breaks: "an Ack or Nack refused by the lease leaves its hand-out out in the core: Close does not give it back, and the group's next owner waits a visibility timeout for it (review 14)",
		Edits: []edit{{
			File: "ordered/receive.go",
			Old:  `			_ = r.core.Disown(now, &m.d)`,
			New:  `			_ = now`,
		}},
		Pkg:  "./ordered/scaleout",
		Run:  "^TestReview14_FencedQueueKeepsItsMessagesInvisible$",
		Race: true,
	},
	{
		Name:   "scaleout-run-error-not-fenced",
		Breaks: "a shard whose Run ended on the application's own Lease error stays leased and unserved: the keeper renews it, its Queue keeps what it fetched (review 14)",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ordered.ErrClosed) {`,
			New:  `		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ordered.ErrClosed) && false {`,
		}},
		Pkg:  "./ordered/scaleout",
		Run:  "^TestReview14_AppLeaseErrorLeavesShardHeldAndUnserved$",
		Race: true,
	},
	{
		Name:   "scaleout-starts-dead-lease",
		Breaks: "a start decided before the keeper was held up runs for a lease already past its local deadline: the shard is listed by two members at once (review 14)",
		Edits: []edit{{
			File: "ordered/scaleout/receiver.go",
			Old:  `	if k := r.keeper; !time.Now().Before(k.Deadline(s, l.Token)) {`,
			New:  `	if k := r.keeper; false && !time.Now().Before(k.Deadline(s, l.Token)) {`,
		}},
		Pkg:  "./ordered/scaleout",
		Run:  "^TestReview14_ThreeMembersOwnedTwice$",
		Race: true,
	},
}

func init() {
	mutants = append(mutants, scaleoutMutants...)
}
