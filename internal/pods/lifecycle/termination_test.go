package lifecycle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestTerminationMessage(t *testing.T) {
	file := &v1.Container{TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile}
	fallback := &v1.Container{TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError}
	tests := []struct {
		name     string
		c        *v1.Container
		exitCode int32
		reason   string
		data     string
		exists   bool
		wantMsg  string
		wantLogs bool
	}{
		{name: "file", c: file, data: "OK", exists: true, wantMsg: "OK"},
		{name: "file of a failed container", c: file, exitCode: 1, reason: "Error", data: "DONE", exists: true, wantMsg: "DONE"},
		{name: "empty file, policy File", c: file, exitCode: 1, reason: "Error", exists: true},
		{name: "fallback: succeeded with an empty file", c: fallback, exists: true},
		{name: "fallback: succeeded with a message", c: fallback, data: "OK", exists: true, wantMsg: "OK"},
		{name: "fallback: failed with an empty file", c: fallback, exitCode: 1, reason: "Error", exists: true, wantLogs: true},
		{name: "fallback: failed without the file", c: fallback, exitCode: 1, reason: "Error", wantLogs: true},
		{name: "fallback: failed with a message", c: fallback, exitCode: 1, reason: "Error", data: "file", exists: true, wantMsg: "file"},
		{name: "fallback: could not run", c: fallback, exitCode: 128, reason: "ContainerCannotRun", exists: true},
		{name: "no path", c: &v1.Container{TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError}, exitCode: 2, reason: "Error", wantLogs: true},
		{name: "long file cut", c: file, data: strings.Repeat("x", 5000), exists: true, wantMsg: strings.Repeat("x", 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, logs := TerminationMessage(tt.c, tt.exitCode, tt.reason, []byte(tt.data), tt.exists)
			if msg != tt.wantMsg || logs != tt.wantLogs {
				t.Errorf("TerminationMessage = %q, %v; want %q, %v", msg, logs, tt.wantMsg, tt.wantLogs)
			}
		})
	}
}

func TestLastLogString(t *testing.T) {
	if got := LastLogString([]byte("DONE\n")); got != "DONE\n" {
		t.Errorf("short log: %q", got)
	}
	long := strings.Repeat("a", 3000) + "END"
	if got := LastLogString([]byte(long)); len(got) != 2048 || !strings.HasSuffix(got, "END") {
		t.Errorf("long log: %d bytes, ends %q", len(got), got[len(got)-3:])
	}
}

func TestWithTerminationMessage(t *testing.T) {
	tests := []struct{ runtime, msg, want string }{
		{"", "", ""}, {"oom", "", "oom"}, {"", "DONE", "DONE"}, {"oom", "DONE", "oom: DONE"},
	}
	for _, tt := range tests {
		if got := WithTerminationMessage(tt.runtime, tt.msg); got != tt.want {
			t.Errorf("WithTerminationMessage(%q, %q) = %q, want %q", tt.runtime, tt.msg, got, tt.want)
		}
	}
}
