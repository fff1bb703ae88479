package pods

import (
	"strings"
	"testing"
	"time"
)

func TestLogWriter(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lines := []string{"a\n", "b\n", "c\n", "d\n"}
	tests := []struct {
		name string
		opts LogOptions
		// before is what is written before Flush; after, what all is written once "e" follows it.
		before, after string
	}{
		{name: "all lines, at once", opts: LogOptions{}, before: "a\nb\nc\nd\n", after: "a\nb\nc\nd\ne\n"},
		{name: "tail: the last two at Flush, then at once", opts: LogOptions{TailLines: 2}, before: "", after: "c\nd\ne\n"},
		{name: "tail longer than the log", opts: LogOptions{TailLines: 9}, before: "", after: "a\nb\nc\nd\ne\n"},
		{name: "since: the lines written before it left out, tail counted after it",
			opts: LogOptions{SinceTime: t0.Add(2 * time.Second), TailLines: 3}, before: "", after: "c\nd\ne\n"},
		{name: "timestamps", opts: LogOptions{Timestamps: true, TailLines: 1}, before: "",
			after: "2026-01-02T03:04:08Z d\n2026-01-02T03:04:09Z e\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			lw := NewLogWriter(tt.opts, &out)
			buf := make([]byte, 0, 8)
			for i, l := range lines {
				// One buffer for every line: a kept line must not change with it.
				buf = append(buf[:0], l...)
				if err := lw.WriteLine(t0.Add(time.Duration(i)*time.Second), buf); err != nil {
					t.Fatal(err)
				}
			}
			if got := out.String(); got != tt.before {
				t.Errorf("before Flush: %q, want %q", got, tt.before)
			}
			if err := lw.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := lw.WriteLine(t0.Add(4*time.Second), []byte("e\n")); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.after {
				t.Errorf("written %q, want %q", got, tt.after)
			}
		})
	}
}
