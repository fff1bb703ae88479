package systemdrt

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/execlimits"
)

// TestIntegrationExecutorLimits: validation's limits are the executor's, at the boundary. The
// largest argument and NAME=value execve(2) takes run (Succeeded); one byte more, and user id
// 65535, are refused by Validate with their field paths — and run anyway (validation bypassed)
// they never get to Succeeded: the kernel or systemd refuses them.
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

	for _, tc := range []struct {
		name, uid, field string
		mutate           func(c *v1.Container)
	}{
		{"argument", "limits-arg-1", "spec.containers[0].args[1]", func(c *v1.Container) { c.Args = []string{"sh", longest + "x"} }},
		{"env", "limits-env-1", "spec.containers[0].env[0].value", func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "BIG", Value: longest[:execlimits.MaxArgStrlen-len("BIG=")]}}
		}},
		{"user 65535", "limits-uid-1", "spec.containers[0].securityContext.runAsUser", func(c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(65535))}
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
