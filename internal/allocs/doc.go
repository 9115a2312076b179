// Package allocs holds no code: its tests pin the allocations of one
// message's whole life through an ordered.Queue (SendAsync, the queue, the
// store, Run's hand-out, the ack, the commit, the delete), over memqueue and
// memstore. internal/recvcore's TestAllocsPerMessage pins the receive
// core's share alone.
//
// They live apart from the ordered package's tests so that CI, which runs
// them without -race (the race detector allocates) and once more with an
// allocation planted (tag inorder_plant, INORDER_PLANT=handout-alloc),
// compiles one small test binary for them, not ordered's.
package allocs
