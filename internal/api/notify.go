package api

import "sync"

// Broadcast wakes every waiter at once: Wait returns a channel that Notify closes. A Backend can
// embed one to be a PodNotifier. The zero value is ready to use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel closed by the next Notify.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify wakes the waiters; it never blocks.
func (b *Broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
