package crirt

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// criProbe prints the shell's /proc status and what it may do, then sleeps ($$$$ is the
// shell's $$ once the kubelet's $(VAR) expansion has unescaped it).
const criProbe = `cat /proc/$$$$/status
if touch /probe 2>/dev/null; then echo rootfs=yes; else echo rootfs=no; fi
if [ -n "$(cat /proc/timer_list 2>/dev/null)" ]; then echo timers=yes; else echo timers=no; fi
echo done=yes
exec sleep 100000`

// TestIntegrationSecurityContextCRI: containerd applies the security context the worker sends
// (the process's /proc status and what it may do), and runAsNonRoot is checked against the
// image's user (the test image names none: root) before anything is created.
func TestIntegrationSecurityContextCRI(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	cases := []struct {
		name string
		sc   *v1.SecurityContext
		want map[string]string
	}{
		{"image user root, containerd's default capabilities", nil,
			map[string]string{"Uid": "0\t0\t0\t0", "CapBnd": "00000000a80425fb", "CapEff": "00000000a80425fb", "NoNewPrivs": "0", "Seccomp": "0", "rootfs": "yes", "timers": "no"}},
		{"non-root, one capability, no escalation, RuntimeDefault, read-only root", &v1.SecurityContext{
			RunAsUser: i64(1000), RunAsGroup: i64(3000), AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
			Capabilities:   &v1.Capabilities{Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"NET_BIND_SERVICE"}},
			SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
		}, map[string]string{"Uid": "1000\t1000\t1000\t1000", "Gid": "3000\t3000\t3000\t3000", "CapBnd": "0000000000000400", "CapEff": "0000000000000000",
			"NoNewPrivs": "1", "Seccomp": "2", "rootfs": "no"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctr := container("main", criProbe)
			ctr.SecurityContext = c.sc
			pod := itPod(fmt.Sprintf("sec%d", i), fmt.Sprintf("it-sec-%d", i), ctr)
			slice := it.slice(t, pod)
			syncUntil(t, rt, pod, slice, "running", running)
			got := map[string]string{}
			var out string
			deadline := time.Now().Add(20 * time.Second)
			for got["done"] != "yes" {
				if time.Now().After(deadline) {
					t.Fatalf("the probe never finished: %v", got)
				}
				time.Sleep(50 * time.Millisecond)
				var buf bytes.Buffer
				if err := rt.Logs(t.Context(), pod, "main", pods.LogOptions{}, &buf); err != nil {
					t.Fatal(err)
				}
				out = buf.String()
				for _, l := range strings.Split(out, "\n") {
					if k, v, ok := strings.Cut(l, ":"); ok {
						got[k] = strings.TrimSpace(v)
					} else if k, v, ok := strings.Cut(l, "="); ok {
						got[k] = v
					}
				}
			}
			for k, want := range c.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
			if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("runAsNonRoot with a root image", func(t *testing.T) {
		ctr := container("main", "sleep 100000")
		ctr.SecurityContext = &v1.SecurityContext{RunAsNonRoot: &yes}
		pod := itPod("nonroot", "it-sec-nonroot", ctr)
		slice := it.slice(t, pod)
		st := syncUntil(t, rt, pod, slice, "CreateContainerConfigError", func(st v1.PodStatus, err error) bool {
			return err == nil && len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Waiting != nil &&
				st.ContainerStatuses[0].State.Waiting.Reason == lifecycle.ReasonCreateContainerConfigError
		})
		if msg := st.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "container has runAsNonRoot and image will run as root") {
			t.Errorf("message %q", msg)
		}
		if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
			t.Fatal(err)
		}
	})
}
