package ordered

// Review7RecoveryBook returns how many entries the sender's recovery book
// holds (failed sends, and those Recover is sending).
func Review7RecoveryBook(q *Queue) int {
	s, err := q.sender()
	if err != nil {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recovery.items)
}
