package pods

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestParseLogQuery: the kubelet API's and the local API's one parser, with kubectl's meaning.
func TestParseLogQuery(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name    string
		query   string
		want    LogQuery
		wantErr string // the parameter the error names
	}{
		{name: "none", query: ""},
		{name: "kubectl logs -f --timestamps --previous", query: "follow=true&timestamps=true&previous=1",
			want: LogQuery{Options: LogOptions{Follow: true, Timestamps: true, Previous: true}}},
		{name: "a boolean is true unless 0 or false (apimachinery)", query: "follow=yes&previous=&timestamps=FALSE",
			want: LogQuery{Options: LogOptions{Follow: true, Previous: true}}},
		{name: "tail", query: "tailLines=10", want: LogQuery{Options: LogOptions{TailLines: 10}}},
		{name: "tail is tailLines's older name, and wins", query: "tail=3&tailLines=10", want: LogQuery{Options: LogOptions{TailLines: 3}}},
		{name: "tail=all", query: "tail=all&tailLines=10"},
		{name: "tail 0 is no lines", query: "tailLines=0", want: LogQuery{Empty: true}},
		{name: "tail 0 followed is the new lines", query: "tailLines=0&follow=true", want: LogQuery{Options: LogOptions{Follow: true, SinceTime: now}}},
		{name: "limit", query: "limitBytes=100", want: LogQuery{LimitBytes: 100}},
		{name: "since seconds", query: "sinceSeconds=60", want: LogQuery{Options: LogOptions{SinceTime: now.Add(-time.Minute)}}},
		{name: "since seconds, huge", query: "sinceSeconds=9223372036854775807", want: LogQuery{Options: LogOptions{SinceTime: now.Add(-maxSinceSeconds * time.Second)}}},
		{name: "since time", query: "sinceTime=2026-01-01T00:00:00Z", want: LogQuery{Options: LogOptions{SinceTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		{name: "since time with fractional seconds", query: "sinceTime=2026-01-01T00:00:00.25Z",
			want: LogQuery{Options: LogOptions{SinceTime: time.Date(2026, 1, 1, 0, 0, 0, 250e6, time.UTC)}}},
		{name: "since time with an offset", query: "sinceTime=2026-01-01T01:00:00.123456789%2B01:00",
			want: LogQuery{Options: LogOptions{SinceTime: time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)}}},
		{name: "stream All", query: "stream=All"},
		{name: "negative tail", query: "tailLines=-1", wantErr: "tailLines"},
		{name: "negative legacy tail", query: "tail=-1", wantErr: "tailLines"},
		{name: "tail not a number", query: "tailLines=ten", wantErr: "tailLines"},
		{name: "empty tail", query: "tailLines=", wantErr: "tailLines"},
		{name: "zero limit", query: "limitBytes=0", wantErr: "limitBytes"},
		{name: "zero since seconds", query: "sinceSeconds=0", wantErr: "sinceSeconds"},
		{name: "bad since time", query: "sinceTime=yesterday", wantErr: "sinceTime"},
		{name: "since time without T", query: "sinceTime=2026-01-01 00:00:00Z", wantErr: "sinceTime"},
		{name: "both since", query: "sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", wantErr: "sinceTime"},
		{name: "stderr only is refused", query: "stream=Stderr", wantErr: "stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseLogQuery(q, now)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+":") {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Options.SinceTime.Equal(tc.want.Options.SinceTime) {
				t.Errorf("since %v, want %v", got.Options.SinceTime, tc.want.Options.SinceTime)
			}
			got.Options.SinceTime, tc.want.Options.SinceTime = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			// What a client sends for it reads back the same.
			back, err := ParseLogQuery(got.Values(), now)
			if err != nil || back != got {
				t.Errorf("Values() = %v reads back as %+v, %v", got.Values(), back, err)
			}
		})
	}
}

func TestLogQueryWriter(t *testing.T) {
	var b bytes.Buffer
	w := LogQuery{LimitBytes: 5}.Writer(&b)
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write = %d, %v", n, err)
	}
	if n, err := w.Write([]byte("defg")); n != 2 || !errors.Is(err, ErrLogLimit) {
		t.Fatalf("second write = %d, %v; want 2, ErrLogLimit", n, err)
	}
	if b.String() != "abcde" {
		t.Errorf("wrote %q", b.String())
	}
	b.Reset()
	if _, err := (LogQuery{Empty: true}).Writer(&b).Write([]byte("x")); err != nil || b.Len() != 0 {
		t.Errorf("Empty wrote %q, %v", b.String(), err)
	}
}
