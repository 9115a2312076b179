package recvcore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// worldDefectSeeds are rapid seeds whose TestWorld case (one check) breaks
// a property of worldKnownFailing on 3ffb92a. They depend on the model as
// it is: a change to what a case draws, or to the Core's choices, moves
// them (find new ones with INORDER_WORLD_STRICT=<property>).
var worldDefectSeeds = []struct {
	prop string
	seed uint64
}{}

// TestWorldKnownDefects replays the case of each known defect. It passes
// while the enforced properties hold; it says which defects the cases no
// longer show (fixed, or the seed moved), and with INORDER_WORLD_STRICT
// naming a property its replay fails while the defect is there.
func TestWorldKnownDefects(t *testing.T) {
	for _, d := range worldDefectSeeds {
		t.Run(fmt.Sprintf("%s/%d", d.prop, d.seed), func(t *testing.T) {
			setFlag(t, "rapid.seed", fmt.Sprint(d.seed))
			setFlag(t, "rapid.checks", "1")
			broken := false
			rapid.Check(t, func(rt *rapid.T) {
				broken = runWorld(rt).broken[d.prop]
			})
			_, known := worldKnownFailing[d.prop]
			require.True(t, known, "a seed for %s, which is not in worldKnownFailing", d.prop)
			if !broken {
				t.Logf("seed %d no longer breaks %s (%s): fixed, or the seed moved", d.seed, d.prop, worldKnownFailing[d.prop])
			}
		})
	}
}
