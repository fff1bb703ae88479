//go:build !linux

package logging

// journalSender has no journald to talk to off Linux.
type journalSender struct{ path string }

// send always reports the journal unavailable, so the fallback handler writes.
func (s *journalSender) send([]byte) error { return errJournalUnavailable }
