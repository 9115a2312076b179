package recvcore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inorder/inorder/internal/recvcore"
	"github.com/inorder/inorder/seqstore"
)

// An AtLeastOnce group stopped by a store error that fails for good (the
// commit of an acknowledged advance refused with ErrCorrupt) keeps what the
// application acknowledged: the message is not given back to the queue, a
// clean Close is not done while the advance is unwritten, and once the
// store takes writes again the group's retry writes the advance and
// deletes the message. It is never handed out a second time. Found by the
// world model once it injected permanent store errors (2026-12-06): the
// group adopted the stored cursor and handed the acknowledged message out
// again after its successor ([order]); a clean Close returned with the
// advance unwritten ([close-durable]); the message went back to the queue
// while its advance was to be written ([held-lapse]).
func TestFailedGroupKeepsAcknowledged(t *testing.T) {
	for _, closing := range []bool{false, true} {
		name := "running"
		if closing {
			name = "closing"
		}
		t.Run(name, func(t *testing.T) {
			cfg := ehConfig()
			cfg.Mode = recvcore.AtLeastOnce
			cfg.VisibilityMargin = time.Minute // extensions on: a give-back is a shortening
			h := newEH(t, cfg)
			curs := map[string]seqstore.Cursor{}
			r1 := h.arrive(tagged("g", 1, 1))[0]
			h.readAll(curs)
			d, ok := h.next()
			require.True(t, ok)
			_, err := h.c.Ack(h.now, &d, false)
			require.NoError(t, err)
			h.ready()
			h.tick(cfg.ReapInterval)
			require.Len(t, h.commits, 1, "the acknowledged advance")
			h.commitAll(nil, &seqstore.BatchError{Errs: []error{seqstore.ErrCorrupt}})

			short := h.visAll()
			assert.NotContains(t, short, r1, "the acknowledged message went back to the queue while its advance waits to be written")
			assert.Empty(t, h.deleted, "deleted before its advance is durable")
			if closing {
				h.c.Close(h.now)
				h.ready()
				h.visAll()
				require.False(t, h.c.Flushed(), "a clean Close is done while an acknowledged advance is unwritten: the next receiver hands the message out again")
			}

			// The message comes back from the queue (its visibility ended
			// anyway): a duplicate, not handed out again.
			h.arrive(tagged("g", 1, 1))
			for range 4 {
				h.tick(cfg.RetryMax)
				h.readAll(curs)
				h.commitAll(curs, nil)
				h.deleteAll()
				h.visAll()
				if !closing {
					_, again := h.next()
					require.False(t, again, "g/1/1, acknowledged, was handed out again")
				}
			}
			assert.Equal(t, uint64(2), curs["g"].Next, "the retry wrote the acknowledged advance")
			assert.Contains(t, h.deleted, r1, "deleted once its advance is durable")
			if closing {
				assert.True(t, h.c.Flushed())
			}
		})
	}
}

// An AtMostOnce hand-out waits for its commit; the commit's outcome is
// unknown (it took effect), and the read that would settle it fails for
// good: the group stops and the hand-out ends with the error. Read again,
// the stored cursor is past the message: its copy must still reach the
// application once (skipped, handed out Unordered), not be deleted as a
// duplicate unseen. Found by the world model with reads failing for good
// (INORDER_REV_READCORRUPT=30, seeds 33 and 3, 2026-12-06).
func TestFailedAMOUncertainHandOutNotLost(t *testing.T) {
	cfg := ehConfig()
	cfg.Mode = recvcore.AtMostOnce
	h := newEH(t, cfg)
	curs := map[string]seqstore.Cursor{"g": {Epoch: 1, Next: 1}}
	h.arrive(tagged("g", 1, 1))
	h.readAll(curs)
	d, ok := h.next()
	require.True(t, ok)
	require.NotZero(t, d.Await, "an AtMostOnce hand-out waits for its commit")
	require.Len(t, h.commits, 1)
	// Applied, reported failed: the Core reads to settle it, and that read
	// fails for good.
	cm := h.commits[0]
	h.commits = nil
	curs["g"] = cm.Advances[0].To
	h.c.Committed(h.now, cm.ID, errors.New("timeout after the write"))
	h.ready()
	require.NotEmpty(t, h.reads, "the read that settles the write")
	h.rkReadsFail()
	h.tick(cfg.RetryMax)
	for range 4 {
		h.readAll(curs)
		h.commitAll(curs, nil)
		h.deleteAll()
		h.visAll()
		h.tick(cfg.RetryMax)
	}
	h.arrive(tagged("g", 1, 1)) // the copy, back in the queue
	h.readAll(curs)
	var got []recvcore.Delivery
	for range 4 {
		if d2, ok := h.next(); ok {
			got = append(got, d2)
		}
		h.commitAll(curs, nil)
		h.readAll(curs)
	}
	require.Len(t, got, 1, "g/1/1, whose commit took effect while its hand-out ended with an error, never reached the application")
	assert.True(t, got[0].Unordered)
}
