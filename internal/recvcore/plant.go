package recvcore

// Planted bugs, for the crash harness's proof that its checker catches
// receive-side bugs (internal/crashtest TestCheckerCatchesPlantedBugs).
// They exist only in builds with the tag inorder_plant (plant_on.go), which
// reads INORDER_PLANT; in every other build they are constant false and
// the compiler drops the code they guard.
//
//   - nodedup: a copy of a handed-out seq is not recognised as a duplicate:
//     its group goes back to it and hands it out again;
//   - unsorted: a group with two messages waiting hands out the second one
//     first.
const (
	plantNoDedupName  = "nodedup"
	plantUnsortedName = "unsorted"
)
