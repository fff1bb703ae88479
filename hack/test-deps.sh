#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, if any is missing, so that `make test` passes
# on a fresh machine of this kind by itself. Needs root and apt (Debian 12); does nothing when
# everything is there.
set -euo pipefail
packages=(
	# The throwaway systemd sandbox (internal/testharness/sandbox).
	systemd dbus util-linux mount procps
	# The cgroup v2 VM (internal/testharness/vmtest): qemu, a static busybox for the initramfs, xz for the
	# kernel image (downloaded with apt-get download, never installed).
	qemu-system-x86 busybox-static xz-utils
	# The CRI runtime's tests (internal/testharness/critest): a private containerd per test run, inside the
	# sandbox only, with runc and the CNI plugins of its pod-network test. Never started by the package (see below).
	containerd runc containernetworking-plugins
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -Eq "^install ok (installed|triggers-pending|triggers-awaited|unpacked|half-configured)" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "test-deps: missing ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
	exit 0
fi
echo "test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# containerd's package enables and starts containerd.service. The tests start their own, inside
# the throwaway systemd; the machine's must never run. policy-rc.d (exit 101: "action
# forbidden") makes the maintainer scripts leave every service alone during this install.
guard=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	guard=1
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ -z "$guard" ] || rm -f /usr/sbin/policy-rc.d
