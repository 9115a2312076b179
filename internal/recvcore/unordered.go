package recvcore

// unorderedSet knows the Unordered copies (untagged bodies, late arrivals)
// this Core holds or has settled, so that none is handed out twice in its
// life: the settled ones are remembered within the memory budget, the
// oldest forgotten first.
type unorderedSet struct {
	held  map[seenKey]*msg     // held or out
	seen  map[seenKey]struct{} // settled
	order fifo[seenKey]
}

type seenKey struct {
	group, id  string
	epoch, seq uint64
}

func newUnorderedSet() unorderedSet {
	return unorderedSet{held: make(map[seenKey]*msg), seen: make(map[seenKey]struct{})}
}

func unorderedKey(m *msg) seenKey {
	if m.has(fUntagged) {
		return seenKey{id: m.id}
	}
	return seenKey{group: m.name, epoch: m.epoch, seq: m.seq}
}

// settled reports whether key was settled.
func (u *unorderedSet) settled(key seenKey) bool {
	_, ok := u.seen[key]
	return ok
}

// forget drops a held key that was neither handed out nor settled.
func (u *unorderedSet) forget(key seenKey) { delete(u.held, key) }

// drop forgets m, gone, if it is the copy held for its key.
func (u *unorderedSet) drop(m *msg) {
	if len(u.held) == 0 {
		return
	}
	if k := unorderedKey(m); u.held[k] == m {
		delete(u.held, k)
	}
}

// remember records an Unordered key as settled, within the memory budget:
// the oldest keys go first when it is spent.
func (u *unorderedSet) remember(c *Core, key seenKey) {
	delete(u.held, key)
	if _, ok := u.seen[key]; ok {
		return
	}
	u.seen[key] = struct{}{}
	u.order.push(key)
	c.budget.mem += seenCost + len(key.group) + len(key.id)
	for c.budget.mem > c.cfg.MaxMemory*3/4 && u.order.len() > 0 {
		old, _ := u.order.pop()
		delete(u.seen, old)
		c.st.Forgotten++
		c.budget.mem -= seenCost + len(old.group) + len(old.id)
	}
}
