package memstore

import (
	"context"
	"fmt"

	"github.com/inorder/inorder/seqstore"
)

var _ seqstore.LeaseWatcher = (*Store)(nil)

// watcher is one WatchLeases subscription.
type watcher struct {
	ch   chan struct{}
	stop func() bool // stops the context.AfterFunc that ends it
}

// WatchLeases implements seqstore.LeaseWatcher in process: the calls that
// make a change wake the namespace's watchers under the mutex, after the
// change, without waiting (seqstore.Wake). No goroutine runs for a
// watcher: the end of ctx, or Close, closes its channel.
func (st *Store) WatchLeases(ctx context.Context, ns string) (<-chan struct{}, error) {
	if err := seqstore.CheckLease(ns); err != nil {
		return nil, fmt.Errorf("memstore: watch leases: %w", err)
	}
	if err := st.lock(ctx, "watch leases"); err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	w := &watcher{ch: make(chan struct{}, 1)}
	if st.watchers == nil {
		st.watchers = make(map[string]map[*watcher]struct{})
	}
	if st.watchers[ns] == nil {
		st.watchers[ns] = make(map[*watcher]struct{})
	}
	st.watchers[ns][w] = struct{}{}
	w.stop = context.AfterFunc(ctx, func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if _, ok := st.watchers[ns][w]; ok {
			delete(st.watchers[ns], w)
			close(w.ch)
		}
	})
	return w.ch, nil
}

// wake wakes ns's watchers. The mutex is held.
func (st *Store) wake(ns string) {
	for w := range st.watchers[ns] {
		seqstore.Wake(w.ch)
	}
}

// closeWatchers ends every watcher, at Close. The mutex is held.
func (st *Store) closeWatchers() {
	for _, ws := range st.watchers {
		for w := range ws {
			w.stop()
			close(w.ch)
		}
	}
	st.watchers = nil
}
