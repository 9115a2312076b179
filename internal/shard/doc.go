// Package shard places groups on shards and shards on members: the two
// pure functions of scale-out (scaleout.md 3.1 I1 and 3.6).
//
// # Groups to shards
//
// [Of] maps a group to one of S shards with 64-bit FNV-1a, reduced modulo
// S. Senders and receivers must agree on it for every message ever sent, so
// the function behind a hash name ([Hash], stored in
// seqstore.Topology.Hash) may never change: a different function needs a
// new name, and a topology that stores it. A golden test pins its outputs.
//
// # Shards to members
//
// [Assign] gives each shard its desired owner by weighted rendezvous
// hashing (highest random weight, Thaler and Ravishankar 1998): the member
// with the largest -w / ln(u(name, shard)), where w is its weight and u a
// stable 64-bit hash of its Name and the shard, mapped into (0, 1). Every
// receiver computes it alone from the view it read, with no coordinator:
//
//   - Deterministic: it depends on the set of (Name, Weight) only, not on
//     the order of the members, on incarnations or on the process (never
//     hash/maphash, whose seed is per process). Two incarnations of one Name
//     count once, with the higher of their weights.
//   - Stable: a member that joins takes only the shards it now wins, and
//     one that leaves frees only its own; every other shard stays put.
//     Members hash by Name, so a restarted member gets its shards back.
//   - Weighted: a member's expected share is its weight over the sum of
//     weights. Weight 0 makes a standby, assigned nothing; when no member
//     has a weight, no shard is assigned (every shard's owner is "") and the
//     keeper falls back on adopting orphans.
//   - Ties (equal scores, which need equal hashes) go to the smaller Name.
//
// Plain HRW spreads shards like balls into bins, so its busiest member can
// hold well over 2x its fair share S/R when S is a small multiple of R
// (TestAssignLoad measures it: with equal weights and S = 4R, the busiest
// member is over 2x in about 2% of random name sets at R = 4, 12% at
// R = 8 and 27% at R = 16, at worst 3.5x seen up to R = 16; at S >= 16R it is
// under 2x in all but about 1% of sets up to R = 64). [AssignBounded] adds
// the cap of consistent hashing with bounded loads, ceil(1.25·S·w/W), at
// the price of stability: a join or a leave then also moves shards whose
// cap changed.
//
// The assignment is only a hint: safety comes from leases and fences, so
// receivers that disagree (different views, or a score that rounds apart
// by one ulp on another CPU's math.Log) only contend for a lease.
package shard
