package shard

import (
	"fmt"
	"math"
	"slices"

	"github.com/inorder/inorder/seqstore"
)

// Hash names the group-to-shard function [Of] implements, for
// seqstore.Topology.Hash. The function behind a name never changes.
const Hash = "fnv1a64"

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Of returns the shard, in 0..shards-1, of group: FNV-1a 64 of the group's
// bytes modulo shards. It panics when shards < 1 (a topology has at least
// one shard).
func Of(group string, shards int) int {
	if shards < 1 {
		panic(fmt.Sprintf("shard: Of with %d shards", shards))
	}
	h := uint64(fnvOffset64)
	for i := 0; i < len(group); i++ {
		h ^= uint64(group[i])
		h *= fnvPrime64
	}
	return int(h % uint64(shards))
}

// Assignment is each shard's desired owner, indexed by shard: a member's
// Name, or "" when no member has a weight.
type Assignment []string

// Assign computes the desired owner of each of shards shards from members
// by weighted rendezvous hashing (see the package doc). Members with
// weight 0 are standbys; members with the same Name count once, with the
// highest of their weights. It returns nil when shards < 1.
func Assign(members []seqstore.Member, shards int) Assignment {
	if shards < 1 {
		return nil
	}
	cands := candidates(members)
	a := make(Assignment, shards)
	if len(cands) == 0 {
		return a
	}
	for s := range a {
		best, bestScore := "", 0.0
		for _, c := range cands {
			sc := score(c.name, c.weight, s)
			// cands is sorted by Name, so on a tie the smaller Name,
			// seen first, stays.
			if best == "" || sc > bestScore {
				best, bestScore = c.name, sc
			}
		}
		a[s] = best
	}
	return a
}

// Shards returns the shards assigned to name, in ascending order.
func (a Assignment) Shards(name string) []int {
	var out []int
	for s, n := range a {
		if n == name && name != "" {
			out = append(out, s)
		}
	}
	return out
}

type candidate struct {
	name   string
	weight int
}

// candidates returns one entry per Name with a weight above 0, with the
// highest weight of its incarnations, sorted by Name.
func candidates(members []seqstore.Member) []candidate {
	cands := make([]candidate, 0, len(members))
	for _, m := range members {
		cands = append(cands, candidate{m.Name, m.Weight})
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		if x.name != y.name {
			if x.name < y.name {
				return -1
			}
			return 1
		}
		return y.weight - x.weight // highest weight first
	})
	out := cands[:0]
	for i, c := range cands {
		if i > 0 && cands[i-1].name == c.name {
			continue // a lower-weight incarnation of the same Name
		}
		if c.weight > 0 {
			out = append(out, c)
		}
	}
	return out
}

// score is the weighted rendezvous score -w/ln(u) of name for shard, with u
// in (0, 1), so ln(u) < 0 and the score is positive.
func score(name string, weight, shard int) float64 {
	return -float64(weight) / math.Log(unit(name, shard))
}

// unit maps (name, shard) to a stable number in (0, 1), both ends
// excluded: the top 53 bits of the hash, offset by half a step.
func unit(name string, shard int) float64 {
	h := keyHash(name, shard)
	return (float64(h>>11) + 0.5) / (1 << 53)
}

// keyHash is FNV-1a 64 over the name's bytes, a 0 byte (names hold no NUL)
// and the shard's 8 bytes little endian, then the 64-bit finalizer of
// MurmurHash3, because FNV alone barely mixes the last bytes into the high
// bits that unit keeps. It may never change: receivers of two versions
// would disagree on every assignment.
func keyHash(name string, shard int) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime64
	}
	h *= fnvPrime64 // the 0 byte: xor with 0 leaves h as it is
	for i := range 8 {
		h ^= uint64(shard>>(8*i)) & 0xff
		h *= fnvPrime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// AssignBounded is [Assign] with a cap on every member's load (consistent
// hashing with bounded loads, arXiv:1608.01350): a member of weight w holds
// at most ceil(balance·shards·w/W) shards, W the sum of weights. It takes
// the (shard, member) pairs by descending score and gives a shard to the
// first member of its pairs that is under its cap, so when no member of
// Assign's answer is over its cap the answers are the same. A balance
// below 1 counts as 1, which still assigns every shard (the caps sum to at
// least shards). The price is stability: a join or a leave moves, beyond
// the shards Assign would move, those that change hands because a cap
// changed.
func AssignBounded(members []seqstore.Member, shards int, balance float64) Assignment {
	if shards < 1 {
		return nil
	}
	balance = max(balance, 1)
	cands := candidates(members)
	a := make(Assignment, shards)
	if len(cands) == 0 {
		return a
	}
	total := 0
	for _, c := range cands {
		total += c.weight
	}
	type pair struct {
		score float64
		shard int
		cand  int // index in cands, sorted by Name
	}
	pairs := make([]pair, 0, shards*len(cands))
	for s := range shards {
		for i, c := range cands {
			pairs = append(pairs, pair{score(c.name, c.weight, s), s, i})
		}
	}
	slices.SortFunc(pairs, func(x, y pair) int {
		switch {
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		case x.cand != y.cand:
			return x.cand - y.cand // the smaller Name first, as in Assign
		}
		return x.shard - y.shard
	})
	caps := make([]int, len(cands))
	for i, c := range cands {
		caps[i] = int(math.Ceil(balance * float64(shards) * float64(c.weight) / float64(total)))
	}
	left := shards
	for _, p := range pairs {
		if left == 0 {
			break
		}
		if a[p.shard] != "" || caps[p.cand] == 0 {
			continue
		}
		a[p.shard] = cands[p.cand].name
		caps[p.cand]--
		left--
	}
	return a
}
