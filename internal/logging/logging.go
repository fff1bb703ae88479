// Package logging builds slicelet's one *slog.Logger: tint on a terminal,
// native journald records under systemd, plain text or JSON otherwise.
package logging

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/lmittmann/tint"
)

// Formats accepted by Options.Format (and [log] format in the configuration).
const (
	// FormatAuto picks journal under systemd, tint on a terminal, text otherwise.
	FormatAuto = "auto"
	// FormatText is slog's key=value text.
	FormatText = "text"
	// FormatJSON is slog's JSON, one object per line.
	FormatJSON = "json"
	// FormatJournal sends records to journald's native socket with structured fields.
	FormatJournal = "journal"
)

// DefaultJournalSocket is journald's native protocol socket.
const DefaultJournalSocket = "/run/systemd/journal/socket"

// Options configures New.
type Options struct {
	// Level is debug, info, warn or error; empty means info.
	Level string
	// Format is auto, text, json or journal; empty means auto.
	Format string
	// Stderr is where non-journal output goes; nil means os.Stderr.
	Stderr *os.File
	// AddSource adds the caller's file and line (CODE_FILE/CODE_LINE in the journal).
	AddSource bool
	// Identifier is the journal's SYSLOG_IDENTIFIER; empty means the program name.
	Identifier string
	// JournalSocket overrides DefaultJournalSocket (tests).
	JournalSocket string
	// Getenv overrides os.Getenv, used for JOURNAL_STREAM and NO_COLOR (tests).
	Getenv func(string) string
}

// ParseLevel parses a level name: debug, info, warn (or warning) or error,
// in any case. Empty means info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("invalid log level %q: want debug, info, warn or error", s)
}

// ValidFormat reports an error unless s is a format New accepts (empty means auto).
func ValidFormat(s string) error {
	switch s {
	case "", FormatAuto, FormatText, FormatJSON, FormatJournal:
		return nil
	}
	return fmt.Errorf("invalid log format %q: want auto, text, json or journal", s)
}

// handlerKind is the handler New builds.
type handlerKind string

const (
	kindTint    handlerKind = "tint"
	kindText    handlerKind = "text"
	kindJSON    handlerKind = "json"
	kindJournal handlerKind = "journal"
)

// choose decides the handler from the format and what stderr is. It is pure so
// that every combination is table-tested.
//
// underJournal means stderr is connected to journald (JOURNAL_STREAM matches);
// then timestamps are left out of text and JSON lines, since the journal adds its own.
func choose(format string, underJournal, terminal bool) (kind handlerKind, omitTime bool) {
	switch format {
	case FormatText:
		return kindText, underJournal
	case FormatJSON:
		return kindJSON, underJournal
	case FormatJournal:
		return kindJournal, true
	}
	switch {
	case underJournal:
		return kindJournal, true
	case terminal:
		return kindTint, false
	}
	return kindText, false
}

// New builds the logger. It fails only on an invalid level or format.
//
// With the journal format (or auto under systemd) records go to journald's
// native socket; if that socket does not exist, or later refuses a record,
// records are written to stderr as key=value lines without timestamps.
func New(o Options) (*slog.Logger, error) {
	level, err := ParseLevel(o.Level)
	if err != nil {
		return nil, err
	}
	if err := ValidFormat(o.Format); err != nil {
		return nil, err
	}
	stderr := o.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	underJournal := stderrIsJournal(getenv("JOURNAL_STREAM"), stderr)
	kind, omitTime := choose(o.Format, underJournal, isTerminal(stderr))

	hopts := &slog.HandlerOptions{Level: level, AddSource: o.AddSource}
	if omitTime {
		hopts.ReplaceAttr = dropTime
	}
	var h slog.Handler
	switch kind {
	case kindTint:
		h = tint.NewTextHandler(stderr, &tint.Options{Level: level, AddSource: o.AddSource, NoColor: getenv("NO_COLOR") != ""})
	case kindJSON:
		h = slog.NewJSONHandler(stderr, hopts)
	case kindJournal:
		fallback := slog.NewTextHandler(stderr, hopts)
		sock := o.JournalSocket
		if sock == "" {
			sock = DefaultJournalSocket
		}
		id := o.Identifier
		if id == "" {
			id = filepath.Base(os.Args[0])
		}
		if _, err := os.Stat(sock); err != nil {
			h = fallback
			break
		}
		h = newJournalHandler(sock, id, level, o.AddSource, fallback)
	default:
		h = slog.NewTextHandler(stderr, hopts)
	}
	return slog.New(h), nil
}

// dropTime removes the top-level time attribute.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
