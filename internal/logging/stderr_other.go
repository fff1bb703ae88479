//go:build !linux

package logging

import "os"

// stderrIsJournal is false off Linux: there is no journald.
func stderrIsJournal(string, *os.File) bool { return false }

// isTerminal is false off Linux; output is plain text.
func isTerminal(*os.File) bool { return false }
