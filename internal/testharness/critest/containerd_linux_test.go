package critest

import (
	"strings"
	"testing"
)

// TestStartOutsideSandbox: containerd is never started outside the systemd sandbox.
func TestStartOutsideSandbox(t *testing.T) {
	t.Setenv("SLICELET_SYSTEMDTEST", "")
	if _, err := StartContainerd(Options{}); err == nil || !strings.Contains(err.Error(), "only started inside the systemd sandbox") {
		t.Fatalf("StartContainerd outside the sandbox = %v", err)
	}
}
