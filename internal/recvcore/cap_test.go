package recvcore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A receive whose response is lost leaves its messages invisible in the
// queue, received and not deleted as the service counts them: the cap
// counts a failed receive's messages until a visibility timeout passes.
func TestFetchFailedCountsAgainstCap(t *testing.T) {
	cfg := ehConfig()
	cfg.MaxHeld = 40
	cfg.Visibility = 30 * time.Second
	h := newEH(t, cfg)
	room := h.c.Room(h.now)
	h.c.FetchFailed(h.now, 16)
	h.ready()
	require.Equal(t, room-16, h.c.Room(h.now), "a failed receive of 16 may have made 16 invisible")
	h.tick(29 * time.Second)
	require.Equal(t, room-16, h.c.Room(h.now), "until their visibility ends")
	h.tick(2 * time.Second)
	require.Equal(t, room, h.c.Room(h.now), "then they are visible again")
}
