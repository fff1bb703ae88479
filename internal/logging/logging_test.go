package logging

import (
	"log/slog"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	tests := []struct {
		name                   string
		format                 string
		underJournal, terminal bool
		want                   handlerKind
		wantOmitTime           bool
	}{
		{"auto on a terminal is tint", "auto", false, true, kindTint, false},
		{"empty format is auto", "", false, true, kindTint, false},
		{"auto under journal is journal", "auto", true, false, kindJournal, true},
		{"auto under journal wins over a terminal", "auto", true, true, kindJournal, true},
		{"auto on a pipe is text with time", "auto", false, false, kindText, false},
		{"text on a terminal stays text", "text", false, true, kindText, false},
		{"text under journal drops time", "text", true, false, kindText, true},
		{"json under journal drops time", "json", true, false, kindJSON, true},
		{"json on a pipe keeps time", "json", false, false, kindJSON, false},
		{"journal when asked", "journal", false, true, kindJournal, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, omit := choose(tc.format, tc.underJournal, tc.terminal)
			if got != tc.want || omit != tc.wantOmitTime {
				t.Errorf("choose = %s, omitTime %v; want %s, %v", got, omit, tc.want, tc.wantOmitTime)
			}
		})
	}
}

func TestParseLevelAndFormat(t *testing.T) {
	levels := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"INFO", slog.LevelInfo, false},
		{"", slog.LevelInfo, false},
		{"warning", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"verbose", 0, true},
	}
	for _, tc := range levels {
		t.Run("level "+tc.in, func(t *testing.T) {
			got, err := ParseLevel(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ParseLevel(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
	for _, f := range []string{"", "auto", "text", "json", "journal"} {
		if err := ValidFormat(f); err != nil {
			t.Errorf("ValidFormat(%q) = %v", f, err)
		}
	}
	if err := ValidFormat("xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf(`ValidFormat("xml") = %v`, err)
	}
	if _, err := New(Options{Level: "loud"}); err == nil {
		t.Error("New accepted an invalid level")
	}
	if _, err := New(Options{Format: "xml"}); err == nil {
		t.Error("New accepted an invalid format")
	}
}

func TestFieldName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"pod_uid", "POD_UID"},
		{"REQ_id", "REQ_ID"},
		{"slice.name", "SLICE_NAME"},
		{"_private", "PRIVATE"},
		{"9lives", "X_9LIVES"},
		{"", "X_"},
		{"ünïcode", "N_CODE"}, // the leading "_" (from ü) is stripped
		{strings.Repeat("a", 70), strings.Repeat("A", 64)},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := fieldName(tc.in)
			if got != tc.want {
				t.Errorf("fieldName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
