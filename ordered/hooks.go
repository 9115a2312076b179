package ordered

// Hooks are called synchronously on notable events. They must not block and
// must not call back into the Queue; a nil hook is skipped.
type Hooks struct {
	// TODO(receive): OnGap, OnDuplicate, OnRedeliver, OnStale, OnDeadLetter, OnStuck, OnEpoch...
}
