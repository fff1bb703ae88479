package systemdrt

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/execlimits"
)

// TestIntegrationExecutorLimits: validation's limits are the executor's, at the boundary. The
// largest argument and NAME=value execve(2) takes run (Succeeded), and so does user id 65535
// (which systemd's User= refuses: it is set through setpriv); one byte more is refused by
// Validate with its field path — and run anyway (validation bypassed) it never gets to
// Succeeded: the kernel refuses it.
func TestIntegrationExecutorLimits(t *testing.T) {
	it := newIT(t)
	longest := strings.Repeat("x", execlimits.MaxArgStrlen-1)
	ok := sh("ok", "exit 0")
	ok.Args = []string{"sh", longest}
	ok.Env = []v1.EnvVar{{Name: "BIG", Value: longest[:execlimits.MaxArgStrlen-1-len("BIG=")]}}
	pod := itPod("limits-ok", "limits-ok-1", v1.RestartPolicyNever, ok)
	if errs := it.back.Validate(pod); len(errs) != 0 {
		t.Fatalf("Validate refuses the largest arguments: %v", errs)
	}
	it.syncUntil(t, pod, "Succeeded", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })
	uid := sh("uid", "test \"$(id -u)\" = 65535")
	uid.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(65535))}
	pod = itPod("limits-uid", "limits-uid-1", v1.RestartPolicyNever, uid)
	if errs := it.back.Validate(pod); len(errs) != 0 {
		t.Fatalf("Validate refuses user 65535: %v", errs)
	}
	it.syncUntil(t, pod, "Succeeded as user 65535", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })

	for _, tc := range []struct {
		name, uid, field string
		mutate           func(c *v1.Container)
	}{
		{"argument", "limits-arg-1", "spec.containers[0].args[1]", func(c *v1.Container) { c.Args = []string{"sh", longest + "x"} }},
		{"env", "limits-env-1", "spec.containers[0].env[0].value", func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "BIG", Value: longest[:execlimits.MaxArgStrlen-len("BIG=")]}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sh("over", "exit 0")
			tc.mutate(&c)
			pod := itPod("limits-over", tc.uid, v1.RestartPolicyNever, c)
			errs := it.back.Validate(pod)
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Fatalf("Validate = %v, want one error at %s", errs, tc.field)
			}
			st := it.syncUntil(t, pod, "refused by the executor", func(st v1.PodStatus) bool {
				for _, cs := range st.ContainerStatuses {
					if term := cs.State.Terminated; term != nil || cs.RestartCount > 0 || (cs.State.Waiting != nil && cs.State.Waiting.Reason != "ContainerCreating") {
						return true
					}
				}
				return st.Phase == v1.PodFailed
			})
			if st.Phase == v1.PodSucceeded {
				t.Fatalf("the executor ran what validation refuses: %s", describe(st))
			}
			for _, cs := range st.ContainerStatuses {
				if term := cs.State.Terminated; term != nil && term.ExitCode == 0 {
					t.Fatalf("the executor ran what validation refuses: %s", describe(st))
				}
			}
			t.Logf("executor: phase %s, %s", st.Phase, describe(st))
		})
	}
}
