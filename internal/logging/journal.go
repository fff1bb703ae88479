package logging

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// journalHandler writes records to journald's native socket
// (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/): one datagram per record of
// FIELD=value lines. Attribute keys become upper-case field names (pod_uid →
// POD_UID, groups joined with "_"); the record gives MESSAGE, PRIORITY,
// SYSLOG_IDENTIFIER and, with AddSource, CODE_FILE, CODE_LINE and CODE_FUNC.
type journalHandler struct {
	sender     *journalSender
	identifier string
	level      slog.Leveler
	addSource  bool
	prefix     string // field-name prefix from WithGroup, e.g. "REQ_"
	fields     []byte // encoded attributes from WithAttrs
	fallback   slog.Handler
}

func newJournalHandler(socket, identifier string, level slog.Leveler, addSource bool, fallback slog.Handler) *journalHandler {
	return &journalHandler{
		sender:     &journalSender{path: socket},
		identifier: identifier,
		level:      level,
		addSource:  addSource,
		fallback:   fallback,
	}
}

// Enabled implements slog.Handler.
func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// Handle implements slog.Handler. A record journald does not take (socket
// gone, send failed) is written by the fallback handler instead, so it is
// never lost silently: slog itself drops handler errors.
func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256+len(h.fields))
	buf = appendField(buf, "MESSAGE", r.Message)
	buf = appendField(buf, "PRIORITY", strconv.Itoa(priority(r.Level)))
	buf = appendField(buf, "SYSLOG_IDENTIFIER", h.identifier)
	if h.addSource && r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		buf = appendField(buf, "CODE_FILE", f.File)
		buf = appendField(buf, "CODE_LINE", strconv.Itoa(f.Line))
		buf = appendField(buf, "CODE_FUNC", f.Function)
	}
	buf = append(buf, h.fields...)
	r.Attrs(func(a slog.Attr) bool {
		buf = appendAttr(buf, h.prefix, a)
		return true
	})
	if err := h.sender.send(buf); err != nil {
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.fields = append([]byte(nil), h.fields...)
	for _, a := range attrs {
		c.fields = appendAttr(c.fields, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(attrs)
	return &c
}

// WithGroup implements slog.Handler.
func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "_"
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

// priority maps a slog level to a syslog priority (journald's PRIORITY).
func priority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3 // err
	case l >= slog.LevelWarn:
		return 4 // warning
	case l >= slog.LevelInfo:
		return 6 // info
	}
	return 7 // debug
}

// appendAttr appends a resolved attribute, flattening groups with "_".
func appendAttr(buf []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "_"
		}
		for _, g := range a.Value.Group() {
			buf = appendAttr(buf, p, g)
		}
		return buf
	}
	return appendField(buf, fieldName(prefix+a.Key), valueString(a.Value))
}

func valueString(v slog.Value) string {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return err.Error()
		}
		return fmt.Sprint(v.Any())
	}
	return v.String()
}

// fieldName turns an attribute key into a valid journal field name: upper
// case letters, digits and "_", not starting with "_" (those are trusted
// fields journald sets itself) or a digit, at most 64 characters.
func fieldName(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), "_")
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "X_" + name
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// appendField encodes one field: "NAME=value\n", or, when the value contains
// a newline, the binary form "NAME\n" + little-endian uint64 length + value + "\n".
func appendField(buf []byte, name, value string) []byte {
	if !strings.ContainsRune(value, '\n') {
		buf = append(buf, name...)
		buf = append(buf, '=')
		buf = append(buf, value...)
		return append(buf, '\n')
	}
	buf = append(buf, name...)
	buf = append(buf, '\n')
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(value)))
	buf = append(buf, value...)
	return append(buf, '\n')
}

// errJournalUnavailable means journald is not listening; the record should go elsewhere.
var errJournalUnavailable = errors.New("journal socket unavailable")
