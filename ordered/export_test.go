package ordered

// DumpReceiver describes the receive core's state, for test failures.
func DumpReceiver(q *Queue) string {
	q.mu.Lock()
	r := q.rcv
	q.mu.Unlock()
	if r == nil {
		return "no receiver"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.core.Dump()
}
