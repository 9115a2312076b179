package recvcore

import (
	"fmt"
	"github.com/stretchr/testify/assert"
	"runtime"
	"testing"
	"time"

	"github.com/inorder/inorder/internal/envelope"
	"github.com/inorder/inorder/seqstore"
)

// TestRev3_ShedGroupsKeptByTimers: "a flood of new groups stays within
// [MaxMemory]": shed drops quiet groups (a hole, their message parked) and
// uncharges them (becomeEvicted), but each keeps a tGap timer in c.timers
// for GapTimeout (default 30 s), and the timer holds the *group, its
// groupCold and its slices: nothing of it is freed until the timer fires.
// A flood of new groups each missing seq 1 (the default StartFirst and
// GapWait) over a few seconds keeps every shed group reachable. Expected:
// the heap within the budget plus a constant. Happened: 32,000 groups in
// 20 s of a flood (100-byte bodies, parked), 31,934 evicted and all 31,934
// still referenced by their timers (32,000 timers, themselves uncharged);
// Stats.Memory 49,962 of a 65,536 budget while the heap grew by 26 MB
// (about 400x; the test's own maps account for about 3 MB of it).
func TestRev3_ShedGroupsKeptByTimers(t *testing.T) {
	cfg := Config{
		Queue: "q", GapTimeout: 30 * time.Second, StartSettle: 2 * time.Second, MaxAttempts: 3,
		RetryInitial: time.Second, RetryMax: 4 * time.Second, Window: 4000, MaxHeld: 4000, MaxMemory: 64 << 10,
		MaxUndeletedRate: 1e9, MaxBatch: 16, MaxAdvances: 4096, MaxParks: 256, ReapInterval: 200 * time.Millisecond,
		Visibility: time.Hour, VisibilityMargin: -1, VisibilityExtend: time.Hour, ShortVisibility: time.Second,
		MaxVisibilityRate: 10, IdleEvict: time.Minute, MaxEpochAhead: 24 * time.Hour, Park: true,
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	curs := map[string]seqstore.Cursor{}
	parked := map[string]bool{}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	n := 0
	answer := func(rd Ready) {
		for _, r := range rd.Reads {
			out := make([]seqstore.Cursor, len(r.Streams))
			for i, s := range r.Streams {
				out[i] = curs[s.Group]
			}
			c.Read(now, r.ID, out, nil)
		}
		for _, cm := range rd.Commits {
			for _, a := range cm.Advances {
				curs[a.Stream.Group] = a.To
			}
			c.Committed(now, cm.ID, nil)
		}
		for _, p := range rd.Parks {
			for _, e := range p.Entries {
				parked[e.Stream.Group] = true
			}
			c.Parked(now, p.ID, nil)
		}
		for _, u := range rd.Unparks {
			c.Unparked(now, u.ID, make([][]seqstore.Parked, len(u.Queries)), nil)
		}
		for _, s := range rd.Scans {
			c.Scanned(now, s.ID, nil, nil) // (the groups stay in the park; not listed here)
		}
		for _, d := range rd.Deletes {
			c.Deleted(now, d.ID, nil)
		}
		for _, v := range rd.Visibility {
			c.Visibility(now, v.ID, v.Receipt, nil)
		}
	}
	for step := 0; step < 2000; step++ { // 20 s of a flood, 10 ms a step
		if room := c.Room(now); room > 0 {
			var in []Incoming
			for range min(room, 16) {
				n++
				g := fmt.Sprintf("group-%07d", n)
				in = append(in, Incoming{Body: envelope.Append(nil, envelope.Header{Group: g, Epoch: 1, Seq: 2}, make([]byte, 100)), ID: g, Receipt: "r-" + g})
			}
			c.Arrive(now, in)
		}
		for i := 0; i < 10; i++ {
			rd := c.Ready(now)
			if rd.Empty() {
				break
			}
			answer(rd)
		}
		now = now.Add(10 * time.Millisecond)
		c.Tick(now)
	}
	evicted := map[string]bool{} // timers of groups shed since: they name them, they keep nothing
	for _, tm := range c.timers {
		if tm.name != "" && c.groups[tm.name] == nil {
			evicted[tm.name] = true
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	heap := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	st := c.Stats()
	t.Logf("groups flooded %d, in memory %d, evicted %d; evicted groups still referenced by timers %d (timers %d); charged %d of %d; heap growth %d (%.0fx the budget; the test's own maps hold %d cursors)",
		n, st.Groups, st.Evicted, len(evicted), len(c.timers), st.Memory, cfg.MaxMemory, heap, float64(heap)/float64(cfg.MaxMemory), len(curs))
	runtime.KeepAlive(c)
	// Timers no longer point at groups. What the flood leaves must fit the
	// budget give or take a constant, besides the test's own maps (the
	// cursors and parked names of every group flooded: about 100 bytes
	// each).
	assert.Less(t, heap, int64(4*cfg.MaxMemory)+int64(n)*100+2<<20, "heap held after a flood of %d groups", n)
	assert.LessOrEqual(t, st.Memory, 2*cfg.MaxMemory, "memory charged, the timers included")
}
