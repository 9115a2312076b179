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
