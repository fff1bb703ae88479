#!/usr/bin/env bash
# make demo: real slicelet against a real systemd.
#
# Where PID 1 is not systemd (this machine kind), a throwaway systemd is booted in private
# namespaces (internal/testharness/sandbox, see hack/sandbox) and everything happens inside it; nothing is
# left on the machine afterwards. Where PID 1 is systemd, the machine's own systemd is used,
# with a warning, and slicelet runs as a transient unit that the demo stops at the end.
#
# It runs from any checkout: the throwaway systemd has its own /tmp, /run and /var/tmp, so the
# checkout is bound into it at the same path (read-write, as it is for root outside).
# SLICELET_DEMO_NAME names the throwaway systemd (default slicelet-demo; the test of this script
# uses its own, so that it never stops a demo someone is watching).
set -euo pipefail
cd "$(dirname "$0")/.."
# The physical path: a symlink on the way could point into a directory that is private inside.
repo=$(pwd -P)
export GOTOOLCHAIN=local

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

case $repo in
*[[:cntrl:]]*)
	echo "make demo: the checkout path $(printf %q "$repo") holds a control character; clone it elsewhere" >&2
	exit 1
	;;
esac
go build -o build/sandbox ./hack/sandbox
mkdir -p build/demo
# The checkout path goes into TOML basic strings: escape backslashes and quotes. (Bash expansion,
# not sed: the path may hold any of sed's special characters; the quoted replacement keeps '&'.)
repo_toml=${repo//\\/\\\\}
repo_toml=${repo_toml//\"/\\\"}
template=$(<examples/demo/config.toml)
printf '%s\n' "${template//@REPO@/"$repo_toml"}" >build/demo/config.toml
conf=$repo/build/demo/config.toml
name=${SLICELET_DEMO_NAME:-slicelet-demo}
inside=()
if [ "$(cat /proc/1/comm)" = systemd ]; then
	echo "WARNING: PID 1 is systemd: the demo uses this machine's real systemd (kubepods.slice is created for real)." >&2
	[ "$(id -u)" = 0 ] || { echo "make demo needs root" >&2; exit 1; }
else
	[ "$(id -u)" = 0 ] || { echo "make demo needs root (it boots a throwaway systemd)" >&2; exit 1; }
	bold "booting a throwaway systemd ($name)"
	build/sandbox stop "$name" >/dev/null 2>&1 || true
	build/sandbox start -bind "$repo" "$name"
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
running=0
for _ in $(seq 1 600); do
	running=$(ctl get pods 2>/dev/null | grep -c Running || true)
	[ "$running" -ge 3 ] && break
	sleep 0.1
done
ctl get pods -o wide
if [ "$running" -lt 3 ]; then
	echo "make demo: $running of the 3 example pods Running after a minute; slicelet's journal:" >&2
	sb journalctl --no-pager -u slicelet-demo -o cat | tail -n 30 >&2
	exit 1
fi

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
