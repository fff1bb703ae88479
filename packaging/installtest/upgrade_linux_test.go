package installtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// UpgradeFromEnv names an earlier release's .deb to upgrade from (and back to). Without it the
// test upgrades dist's package to itself rebuilt under the next Debian revision: the same
// binaries, through dpkg's whole upgrade path (prerm upgrade, unpack over the running
// service, postinst configure <old version>, the restart).
const UpgradeFromEnv = "SLICELET_UPGRADE_FROM"

// upgradeManifest is a static pod in the manifest directory, beside the API pod web.
const upgradeManifest = `apiVersion: v1
kind: Pod
metadata: {name: still, namespace: default}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    command: [/bin/sh, -c, "while true; do sleep 1; done"]
`

// TestUpgradeRestartsNoPod: a package upgrade (and the downgrade back) restarts slicelet and
// nothing else. With pods running (one from the local API, one from the manifest directory),
// `dpkg -i` of the next build runs the new slicelet (a new main PID and invocation of
// slicelet.service), and every container unit of the pods keeps its main PID, invocation and
// start time, and every container its ID, restart count and start time in slicelet's status:
// the pods live in their own units under kubepods.slice, outside slicelet.service's cgroup, so
// the restart of slicelet (KillMode=control-group) does not reach them, and the new slicelet
// adopts them.
func TestUpgradeRestartsNoPod(t *testing.T) {
	requireInstance(t)
	began := time.Now()
	defer func() { t.Logf("upgrade life cycle: %s", time.Since(began).Round(time.Millisecond)) }()

	// As in the install test: this machine's policy-rc.d forbids service actions.
	must(t, "rm -f /usr/sbin/policy-rc.d; test ! -e /usr/sbin/policy-rc.d")

	older, newer := debInside, filepath.Join(inst.StateDir(), "next.deb")
	if from := os.Getenv(UpgradeFromEnv); from != "" {
		older = filepath.Join(inst.StateDir(), "previous.deb")
		if err := copyFile(from, older); err != nil {
			t.Fatal(err)
		}
		newer = debInside
	} else {
		done := step(t, "rebuild under the next revision")
		must(t, nextRevision(debInside, newer))
		done()
	}
	oldVersion := must(t, "dpkg-deb -f "+older+" Version")
	newVersion := must(t, "dpkg-deb -f "+newer+" Version")
	if _, _, err := sh(context.Background(), fmt.Sprintf("dpkg --compare-versions %s gt %s", newVersion, oldVersion)); err != nil {
		t.Fatalf("version %s does not upgrade %s", newVersion, oldVersion)
	}
	t.Logf("upgrade %s → %s and back", oldVersion, newVersion)

	done := step(t, "dpkg -i "+oldVersion)
	must(t, "dpkg -i "+older+" 2>&1")
	done()
	done = step(t, "pods Running")
	must(t, "slicectl apply -f "+manifestInside)
	must(t, "mkdir -p /etc/slicelet/pods.d && cat > /etc/slicelet/pods.d/still.yaml <<'EOF'\n"+upgradeManifest+"EOF")
	waitFor(t, "pods web and still Running", 60*time.Second, func() (bool, string) {
		out, _, err := sh(context.Background(), "slicectl get pods")
		return err == nil && strings.Count(out, "Running") == 2, out
	})
	done()

	before := podState(t)
	if len(before.units) < 2 {
		t.Fatalf("container units under kubepods.slice: %v, want web's and still's", before.units)
	}
	for _, to := range []struct{ deb, version string }{{newer, newVersion}, {older, oldVersion}} {
		done := step(t, "dpkg -i "+to.version)
		out := must(t, "dpkg -i "+to.deb+" 2>&1")
		t.Logf("dpkg -i %s:\n%s", to.version, out)
		done()
		if got := must(t, "dpkg-query -W -f '${Version}' slicelet"); got != to.version {
			t.Fatalf("installed version %s, want %s", got, to.version)
		}
		waitFor(t, "slicelet active again", 30*time.Second, func() (bool, string) {
			out, _, _ := sh(context.Background(), "systemctl is-active slicelet")
			return out == "active", out
		})
		after := podState(t)
		if after.slicelet == before.slicelet {
			t.Errorf("after the package %s: slicelet.service still %s, want the new slicelet (a restart)", to.version, after.slicelet)
		}
		if !reflect.DeepEqual(after.units, before.units) {
			t.Errorf("after the package %s, the pods' container units:\n%v\nwere:\n%v", to.version, after.units, before.units)
		}
		if !reflect.DeepEqual(after.containers, before.containers) {
			t.Errorf("after the package %s, the containers slicelet shows:\n%v\nwere:\n%v", to.version, after.containers, before.containers)
		}
		t.Logf("after the package %s: slicelet %s (was %s); pods' units %v; containers %v", to.version, after.slicelet, before.slicelet, after.units, after.containers)
		before.slicelet = after.slicelet
	}

	done = step(t, "dpkg --purge slicelet")
	must(t, "rm -f /etc/slicelet/pods.d/still.yaml")
	must(t, "dpkg --purge slicelet 2>&1")
	waitFor(t, "no slicelet or kubepods units", 15*time.Second, func() (bool, string) {
		out, _, _ := sh(context.Background(), unitsLeft)
		return out == "", out
	})
	done()
}

// nextRevision is a script that rebuilds the package deb as out under the next Debian revision
// (X-1 → X-2): what a distribution's rebuild of the same source gives. Uncompressed: xz took
// minutes on a loaded build machine, and dpkg installs either.
func nextRevision(deb, out string) string {
	return fmt.Sprintf(`set -e
d=$(mktemp -d)
dpkg-deb -R %[1]s "$d/pkg"
v=$(dpkg-deb -f %[1]s Version)
sed -i "s/^Version: .*/Version: ${v%%-*}-$(( ${v##*-} + 1 ))/" "$d/pkg/DEBIAN/control"
dpkg-deb --root-owner-group -Znone -b "$d/pkg" %[2]s >/dev/null
rm -rf "$d"`, deb, out)
}

// upgradeState is what a package change must and must not change.
type upgradeState struct {
	// slicelet is slicelet.service's main PID and invocation.
	slicelet string
	// units maps each running container unit under kubepods.slice to its main PID, invocation
	// and start time.
	units map[string]string
	// containers maps each pod's container to its ID, restart count and start time, as
	// slicelet shows them.
	containers map[string]string
}

// podState reads upgradeState inside.
func podState(t *testing.T) upgradeState {
	t.Helper()
	s := upgradeState{
		slicelet: must(t, "echo $(systemctl show -P MainPID slicelet) $(systemctl show -P InvocationID slicelet)"),
		units:    map[string]string{},
	}
	out := must(t, `systemctl list-units --type=service --state=running --plain --no-legend | awk '{print $1}' | while read -r u; do
	case "$(systemctl show -P Slice "$u")" in kubepods*) echo "$u pid $(systemctl show -P MainPID "$u") invocation $(systemctl show -P InvocationID "$u") started $(systemctl show -P ExecMainStartTimestampMonotonic "$u")";; esac
done`)
	for _, line := range strings.Split(out, "\n") {
		if unit, rest, ok := strings.Cut(line, " "); ok {
			s.units[unit] = rest
		}
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Status   struct {
				ContainerStatuses []struct {
					Name, ContainerID string
					RestartCount      int32
					State             struct {
						Running *struct{ StartedAt string } `json:"running"`
					}
				}
			}
		}
	}
	waitFor(t, "slicelet shows both pods' containers running", 30*time.Second, func() (bool, string) {
		out, errOut, err := sh(context.Background(), "slicectl get pods -o json")
		if err != nil {
			return false, errOut
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return false, err.Error()
		}
		s.containers = map[string]string{}
		for _, p := range list.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running == nil {
					return false, p.Metadata.Name + "/" + cs.Name + " not running"
				}
				s.containers[p.Metadata.Name+"/"+cs.Name] = fmt.Sprintf("%s restarts %d started %s", cs.ContainerID, cs.RestartCount, cs.State.Running.StartedAt)
			}
		}
		return len(s.containers) == 2, fmt.Sprint(s.containers)
	})
	return s
}
