package pods

import (
	"testing"
	"time"
)

func TestLogOptionsLine(t *testing.T) {
	at := time.Date(2026, 11, 21, 8, 0, 1, 500, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name   string
		opts   LogOptions
		want   string
		wantOK bool
	}{
		{"plain", LogOptions{}, "hello\n", true},
		{"timestamps in UTC with nanoseconds", LogOptions{Timestamps: true}, "2026-11-21T07:00:01.0000005Z hello\n", true},
		{"since before", LogOptions{SinceTime: at.Add(-time.Second)}, "hello\n", true},
		{"since at the line", LogOptions{SinceTime: at}, "hello\n", true},
		{"since after", LogOptions{SinceTime: at.Add(time.Nanosecond)}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.opts.Line(at, []byte("hello\n"))
			if ok != tc.wantOK || string(got) != tc.want {
				t.Errorf("Line = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
