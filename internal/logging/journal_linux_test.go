package logging

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// parseNative decodes a journald native-protocol message into its fields.
func parseNative(t *testing.T, msg []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for len(msg) > 0 {
		nl := bytes.IndexByte(msg, '\n')
		if nl < 0 {
			t.Fatalf("unterminated field %q", msg)
		}
		line := msg[:nl]
		if eq := bytes.IndexByte(line, '='); eq >= 0 {
			out[string(line[:eq])] = append(out[string(line[:eq])], string(line[eq+1:]))
			msg = msg[nl+1:]
			continue
		}
		name := string(line)
		msg = msg[nl+1:]
		if len(msg) < 8 {
			t.Fatalf("field %s: short length", name)
		}
		n := binary.LittleEndian.Uint64(msg)
		msg = msg[8:]
		if uint64(len(msg)) < n+1 || msg[n] != '\n' {
			t.Fatalf("field %s: bad binary value", name)
		}
		out[name] = append(out[name], string(msg[:n]))
		msg = msg[n+1:]
	}
	return out
}

// fakeJournal listens where journald would, in a temporary directory.
func fakeJournal(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return path, conn
}

// receive reads one record, following a memfd when one is passed.
func receive(t *testing.T, conn *net.UnixConn) (map[string][]string, bool) {
	t.Helper()
	buf := make([]byte, 1<<20)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if oobn == 0 {
		return parseNative(t, buf[:n]), false
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control message: %v (%d)", err, len(msgs))
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("unix rights: %v", err)
	}
	f := os.NewFile(uintptr(fds[0]), "memfd")
	defer f.Close()
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL; seals&want != want {
		t.Errorf("memfd seals = %#x, want %#x (journald refuses unsealed memfds)", seals, want)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return parseNative(t, data), true
}

func tempStderr(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func noEnv(string) string { return "" }

func TestJournalFields(t *testing.T) {
	sock, conn := fakeJournal(t)
	log, err := New(Options{Format: "journal", Level: "info", JournalSocket: sock, Stderr: tempStderr(t), Identifier: "slicelet", AddSource: true, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("filtered out by level")
	log.With("pod_uid", "0f1c-22").WithGroup("req").Warn("two\nlines", "id", 7, slog.Group("g", "x", true), "err", errors.New("boom"))

	got, memfd := receive(t, conn)
	if memfd {
		t.Error("a small record was sent through a memfd")
	}
	want := map[string]string{
		"MESSAGE":           "two\nlines", // binary form
		"PRIORITY":          "4",
		"SYSLOG_IDENTIFIER": "slicelet",
		"POD_UID":           "0f1c-22",
		"REQ_ID":            "7",
		"REQ_G_X":           "true",
		"REQ_ERR":           "boom",
		"CODE_LINE":         "", // present, value checked below
	}
	for k, v := range want {
		vs, ok := got[k]
		if !ok || len(vs) != 1 {
			t.Errorf("field %s = %q, want one value", k, vs)
			continue
		}
		if v != "" && vs[0] != v {
			t.Errorf("field %s = %q, want %q", k, vs[0], v)
		}
	}
	if f := got["CODE_FILE"]; len(f) != 1 || !strings.HasSuffix(f[0], "journal_linux_test.go") {
		t.Errorf("CODE_FILE = %q", f)
	}
	if m := got["MESSAGE"]; len(m) == 1 && strings.Contains(m[0], "filtered") {
		t.Error("a debug record passed an info level")
	}
}

func TestJournalPriorities(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, "7"}, {slog.LevelInfo, "6"}, {slog.LevelWarn, "4"}, {slog.LevelError, "3"}, {slog.LevelError + 4, "3"},
	}
	sock, conn := fakeJournal(t)
	log, err := New(Options{Format: "journal", Level: "debug", JournalSocket: sock, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.level.String(), func(t *testing.T) {
			log.Log(t.Context(), tc.level, "m")
			got, _ := receive(t, conn)
			if p := got["PRIORITY"]; len(p) != 1 || p[0] != tc.want {
				t.Errorf("PRIORITY = %q, want %s", p, tc.want)
			}
		})
	}
}

func TestJournalLargeRecordUsesMemfd(t *testing.T) {
	sock, conn := fakeJournal(t)
	log, err := New(Options{Format: "journal", JournalSocket: sock, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 2<<20) // larger than any datagram the socket accepts
	log.Info("big", "blob", big)
	got, memfd := receive(t, conn)
	if !memfd {
		t.Fatal("a 2 MiB record was not sent through a memfd")
	}
	if b := got["BLOB"]; len(b) != 1 || b[0] != big {
		t.Errorf("BLOB has %d values, first %d bytes", len(b), len(b[0]))
	}
}

func TestJournalFallback(t *testing.T) {
	t.Run("socket missing at start", func(t *testing.T) {
		stderr := tempStderr(t)
		log, err := New(Options{Format: "journal", JournalSocket: filepath.Join(t.TempDir(), "none"), Stderr: stderr, Getenv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "pod_uid", "u1")
		out := readAll(t, stderr)
		if out != "level=INFO msg=hello pod_uid=u1\n" {
			t.Errorf("fallback output = %q", out)
		}
	})
	t.Run("socket gone later", func(t *testing.T) {
		sock, conn := fakeJournal(t)
		stderr := tempStderr(t)
		log, err := New(Options{Format: "journal", JournalSocket: sock, Stderr: stderr, Getenv: noEnv})
		if err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if err := os.Remove(sock); err != nil {
			t.Fatal(err)
		}
		log.With("slice", "kubepods.slice").Warn("gone")
		out := readAll(t, stderr)
		if out != "level=WARN msg=gone slice=kubepods.slice\n" {
			t.Errorf("fallback output = %q", out)
		}
	})
}

// journalStreamOf returns the JOURNAL_STREAM value systemd would set for f.
func journalStreamOf(t *testing.T, f *os.File) string {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", sys.Dev, sys.Ino)
}

func TestUnderSystemd(t *testing.T) {
	t.Run("auto sends to the journal when stderr is the journal stream", func(t *testing.T) {
		sock, conn := fakeJournal(t)
		stderr := tempStderr(t)
		stream := journalStreamOf(t, stderr)
		log, err := New(Options{Format: "auto", JournalSocket: sock, Stderr: stderr, Getenv: func(k string) string {
			if k == "JOURNAL_STREAM" {
				return stream
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hi", "unit", "a.service")
		got, _ := receive(t, conn)
		if u := got["UNIT"]; len(u) != 1 || u[0] != "a.service" {
			t.Errorf("UNIT = %q", u)
		}
		if out := readAll(t, stderr); out != "" {
			t.Errorf("stderr got %q", out)
		}
	})
	t.Run("an inherited JOURNAL_STREAM for another stream is ignored", func(t *testing.T) {
		stderr := tempStderr(t)
		other := tempStderr(t)
		log, err := New(Options{Format: "text", Stderr: stderr, Getenv: func(k string) string {
			if k == "JOURNAL_STREAM" {
				return journalStreamOf(t, other)
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hi")
		if out := readAll(t, stderr); !strings.HasPrefix(out, "time=") {
			t.Errorf("text output without the journal should carry a time: %q", out)
		}
	})
	t.Run("text under the journal has no duplicate timestamp", func(t *testing.T) {
		stderr := tempStderr(t)
		stream := journalStreamOf(t, stderr)
		log, err := New(Options{Format: "text", Stderr: stderr, Getenv: func(k string) string {
			if k == "JOURNAL_STREAM" {
				return stream
			}
			return ""
		}})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hi", "pod_uid", "u")
		if out := readAll(t, stderr); out != "level=INFO msg=hi pod_uid=u\n" {
			t.Errorf("output = %q", out)
		}
	})
}

// openPTY returns the terminal end of a new pseudo-terminal pair.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	return slave
}

func TestTerminal(t *testing.T) {
	pty := openPTY(t)
	if !isTerminal(pty) {
		t.Error("isTerminal(pty) = false")
	}
	file := tempStderr(t)
	if isTerminal(file) {
		t.Error("isTerminal(regular file) = true")
	}
	log, err := New(Options{Stderr: pty, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if typ := fmt.Sprintf("%T", log.Handler()); !strings.Contains(typ, "tint") {
		t.Errorf("handler on a terminal = %s, want tint", typ)
	}
	log, err = New(Options{Stderr: file, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if typ := fmt.Sprintf("%T", log.Handler()); typ != "*slog.TextHandler" {
		t.Errorf("handler on a file = %s, want *slog.TextHandler", typ)
	}
}

func TestJournalConcurrent(t *testing.T) {
	sock, conn := fakeJournal(t)
	log, err := New(Options{Format: "journal", JournalSocket: sock, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	done := make(chan struct{})
	for i := range n {
		go func() {
			log.Info("concurrent", "i", i)
			done <- struct{}{}
		}()
	}
	seen := map[string]bool{}
	for range n {
		got, _ := receive(t, conn)
		if v := got["I"]; len(v) == 1 {
			seen[v[0]] = true
		}
	}
	for range n {
		<-done
	}
	if len(seen) != n {
		t.Errorf("received %d distinct records, want %d", len(seen), n)
	}
}
