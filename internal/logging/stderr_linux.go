package logging

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// stderrIsJournal reports whether f is the stream systemd connected to
// journald. systemd sets JOURNAL_STREAM="<dev>:<inode>" of that stream for
// the service; a child whose stderr was redirected inherits the variable but
// not the stream, so the device and inode must be compared (systemd.exec(5),
// "$JOURNAL_STREAM").
func stderrIsJournal(journalStream string, f *os.File) bool {
	devS, inoS, ok := strings.Cut(journalStream, ":")
	if !ok {
		return false
	}
	dev, err1 := strconv.ParseUint(devS, 10, 64)
	ino, err2 := strconv.ParseUint(inoS, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// isTerminal reports whether f is a terminal (TCGETS succeeds).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
