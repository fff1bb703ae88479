#!/usr/bin/env bash
# make demo: real slicelet against a real systemd.
#
# Where PID 1 is not systemd (this machine kind), a throwaway systemd is booted in private
# namespaces (internal/sandbox, see hack/sandbox) and everything happens inside it; nothing is
# left on the machine afterwards. Where PID 1 is systemd, the machine's own systemd is used,
# with a warning, and slicelet runs as a transient unit that the demo stops at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export GOTOOLCHAIN=local

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

go build -o build/sandbox ./hack/sandbox
mkdir -p build/demo
sed "s#@REPO@#$repo#g" examples/demo/config.toml > build/demo/config.toml
conf=$repo/build/demo/config.toml
name=slicelet-demo
inside=()
if [ "$(cat /proc/1/comm)" = systemd ]; then
	echo "WARNING: PID 1 is systemd: the demo uses this machine's real systemd (kubepods.slice is created for real)." >&2
	[ "$(id -u)" = 0 ] || { echo "make demo needs root" >&2; exit 1; }
else
	[ "$(id -u)" = 0 ] || { echo "make demo needs root (it boots a throwaway systemd)" >&2; exit 1; }
	bold "booting a throwaway systemd ($name)"
	build/sandbox stop "$name" >/dev/null 2>&1 || true
	build/sandbox start "$name"
	trap 'bold "stopping the throwaway systemd"; build/sandbox stop "$name"' EXIT
	inside=(build/sandbox exec "$name" --)
fi
sb() { "${inside[@]}" "$@"; }

bold "slicelet config check"
sb "$repo/bin/slicelet" config check --config "$conf"

bold "starting slicelet as a Type=notify service"
sb systemd-run --unit=slicelet-demo --service-type=notify -p WatchdogSec=30s \
	-p WorkingDirectory="$repo" -p OOMScoreAdjust=-999 \
	"$repo/bin/slicelet" run --config "$conf"
sb systemctl --no-pager status slicelet-demo | head -n 12 || true

bold "waiting for the example pods (examples/pods) to run"
ctl() { local c=$1; shift; sb "$repo/bin/slicectl" "$c" --socket /run/slicelet-demo/slicelet.sock "$@"; }
for _ in $(seq 1 100); do
	running=$(ctl get pods 2>/dev/null | grep -c Running || true)
	[ "$running" -ge 3 ] && break
	sleep 0.1
done
ctl get pods -o wide

bold "an API pod: slicectl apply"
ctl apply -f "$repo/examples/api/web.yaml"
sleep 1
ctl get pods

bold "the kubepods hierarchy (systemd-cgls)"
sb systemd-cgls --no-pager -u kubepods.slice

bold "node allocatable on kubepods.slice and the QoS slices"
sb systemctl show --no-pager -p Description -p MemoryLimit -p MemoryMax -p CPUShares -p CPUWeight -p TasksMax \
	kubepods.slice kubepods-burstable.slice kubepods-besteffort.slice

bold "slicectl explain node (offline)"
sb "$repo/bin/slicectl" explain node --config "$conf" -f "$repo/examples/pods/guaranteed.yaml" -f "$repo/examples/pods/burstable.yaml" -f "$repo/examples/pods/besteffort.yaml"

bold "slicectl explain pod (offline)"
sb "$repo/bin/slicectl" explain pod --config "$conf" -f "$repo/examples/pods/burstable.yaml"

bold "slicectl describe pod burstable"
ctl describe pod burstable

bold "slicectl logs burstable"
ctl logs burstable --tail 3

bold "slicectl node"
ctl node

bold "garbage collection: the timers slicelet created (systemctl list-timers)"
sb systemctl list-timers --no-pager 'slicelet-gc-*'

bold "slicectl gc containers --dry-run; slicectl gc images"
ctl gc containers --dry-run
ctl gc images

bold "slicectl delete pod web"
ctl delete pod web

bold "slicelet's journal"
sb journalctl --no-pager -u slicelet-demo -o cat | tail -n 15

sb systemctl stop slicelet-demo
bold "slicelet stopped: the pods keep running (they belong to systemd)"
sb systemctl list-units --no-pager 'kubepods*' 'slicelet-*'
