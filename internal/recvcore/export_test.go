package recvcore

// SetTrace makes c call f on every phase change of a group (from is "new"
// for a group just created): the scripts print them.
func SetTrace(c *Core, f func(group, from, to string)) {
	c.trace = func(g string, a, b phase) {
		from := a.String()
		if a == 0 {
			from = "new"
		}
		f(g, from, b.String())
	}
}

// ReleasedIDs returns the ids of the released entries the cap counts, with
// their ends (debugging aid for the world model).
func ReleasedIDs(c *Core) map[string]string {
	out := map[string]string{}
	for _, e := range c.budget.released {
		out[e.id] += e.until.Format("04:05.000") + "/" + e.receipt + " "
	}
	return out
}

// Every test checks, at every Ready and Deadline, that the lanes Ready
// skips had nothing to do and that the due times the commit and delete
// lanes keep are current (see checkDues).
func init() { checkDues = true }

// SetCheckDues turns checkDues on or off, and returns what puts it back
// (benchmarks measure the Core without the checks).
func SetCheckDues(on bool) (restore func()) {
	was := checkDues
	checkDues = on
	return func() { checkDues = was }
}

// Spare returns how many msgs c keeps for reuse.
func Spare(c *Core) int { return len(c.pool.spare) }
