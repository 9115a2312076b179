package ordered

// Planted regressions, for the proof that the performance guards see a
// small one: the bench's CPU guard (examples/bench, a busy-wait per
// message) and the end-to-end allocation test (TestAllocsPerMessageEndToEnd,
// one allocation per message). They exist only in builds with the tag
// inorder_plant (plant_on.go), which reads the environment once; in every
// other build plantHandOut is an empty function the compiler drops, so
// the hand-out pays nothing for it.
//
//   - INORDER_PLANT_SPIN=1us: each hand-out does that much work, as timed
//     on the bench guard's reference machine (plantRoundsPerNs);
//   - INORDER_PLANT=handout-alloc: each hand-out allocates once more.
