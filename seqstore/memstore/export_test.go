package memstore

import "time"

// SetClock replaces st's clock (epochs, lease and heartbeat expiries).
func (st *Store) SetClock(now func() time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.now = now
}
