#!/usr/bin/env bash
# packaging/check.sh — what a distribution checks on slicelet's packages (make package-check).
#
#   1. contents: every file the packages promise, the conffile / %config(noreplace), gzipped
#      man pages, maintainer scripts;
#   2. lintian on the .deb, rpmlint on the .rpm: any error or warning fails; overrides only in
#      packaging/lintian-overrides and packaging/rpmlint.toml, each with its reason;
#   3. systemd-analyze verify of slicelet.service (and the system.slice drop-in);
#   4. systemd-analyze security --offline: exposure <= 4.0 (MAX_EXPOSURE);
#   5. slicelet config check of packaging/config.toml, the file installed as
#      /etc/slicelet/config.toml.
#
# Run from the repository root after make package. Needs lintian, rpmlint (with rpm) and
# systemd-analyze; with CI=true a missing tool fails, otherwise too (nothing here is optional).
# Both linters run as nobody in a scratch directory: rpmlint unpacks the rpm with
# `rpm2cpio | cpio -id`, and nfpm writes absolute paths into the cpio archive, which GNU cpio
# would extract onto / as root. The cpio wrapper below strips them; running unprivileged makes
# sure nothing can land on the machine even if it did not.
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_EXPOSURE=${MAX_EXPOSURE:-4.0}
failures=0
fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}
step() { echo "== $*"; }

for tool in lintian rpmlint rpm rpm2cpio cpio dpkg-deb systemd-analyze man setpriv; do
	command -v "$tool" >/dev/null || {
		echo "check.sh: $tool not found (apt-get install lintian rpmlint rpm man-db)" >&2
		exit 1
	}
done

shopt -s nullglob
debs=(dist/slicelet_*.deb)
rpms=(dist/slicelet-*.rpm)
if [ ${#debs[@]} -ne 1 ] || [ ${#rpms[@]} -ne 1 ]; then
	echo "check.sh: want exactly one dist/slicelet_*.deb and one dist/slicelet-*.rpm (make package); have: ${debs[*]} ${rpms[*]}" >&2
	exit 1
fi
deb=${debs[0]}
rpm=${rpms[0]}

scratch=$(mktemp -d /tmp/slicelet-package-check.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 0755 "$scratch"

# --- 1. contents ----------------------------------------------------------------------------
step "contents"
want=(
	/usr/bin/slicelet
	/usr/bin/slicectl
	/usr/lib/systemd/system/slicelet.service
	/usr/lib/systemd/system/system.slice.d/50-slicelet.conf
	/usr/lib/sysusers.d/slicelet.conf
	/etc/slicelet/config.toml
	/etc/slicelet/pods.d
	/usr/share/man/man8/slicelet.8.gz
	/usr/share/man/man1/slicectl.1.gz
	/usr/share/man/man1/slicectl-get.1.gz
	/usr/share/man/man8/slicelet-run.8.gz
	/usr/share/man/man5/slicelet.toml.5.gz
	/usr/share/bash-completion/completions/slicectl
	/usr/share/bash-completion/completions/slicelet
	/usr/share/zsh/vendor-completions/_slicectl
	/usr/share/zsh/vendor-completions/_slicelet
)
deb_files=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||')
rpm_files=$(rpm -qlp "$rpm" 2>/dev/null)
for f in "${want[@]}" /usr/share/doc/slicelet/copyright /usr/share/doc/slicelet/changelog.Debian.gz /usr/share/lintian/overrides/slicelet; do
	grep -qxF "$f" <<<"$deb_files" || fail "$deb lacks $f"
done
for f in "${want[@]}" /usr/share/licenses/slicelet/LICENSE; do
	grep -qxF "$f" <<<"$rpm_files" || fail "$rpm lacks $f"
done
# (Lists are read into variables first: grep -q stops reading early, and with pipefail the
# writer's SIGPIPE would count as a failure.)
conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
grep -qxF /etc/slicelet/config.toml <<<"$conffiles" || fail "$deb: /etc/slicelet/config.toml is not a conffile"
rpm_flags=$(rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpm" 2>/dev/null)
grep -qxF 'cn /etc/slicelet/config.toml' <<<"$rpm_flags" || fail "$rpm: /etc/slicelet/config.toml is not %config(noreplace)"
for f in "${want[@]}"; do
	case $f in
	*.gz) dpkg-deb --fsys-tarfile "$deb" | tar -xO ".$f" | gzip -t || fail "$deb: $f is not gzip" ;;
	esac
done
# The packaged config is the repository's, byte for byte.
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./etc/slicelet/config.toml | cmp -s - packaging/config.toml ||
	fail "$deb: /etc/slicelet/config.toml differs from packaging/config.toml"
control_files=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
for s in postinst prerm postrm; do
	grep -qxF "./$s" <<<"$control_files" || fail "$deb lacks $s"
done
for s in PREIN POSTIN PREUN POSTUN; do
	[ -n "$(rpm -qp --qf "%{$s}" "$rpm" 2>/dev/null | grep -v '^(none)$')" ] || fail "$rpm lacks the $s scriptlet"
done
for f in build/package/completion/*.bash; do
	bash -n "$f" || fail "$f: bash syntax"
done

# --- 2. lintian and rpmlint ---------------------------------------------------------------
cp "$deb" "$rpm" packaging/rpmlint.toml "$scratch/"
mkdir "$scratch/bin" "$scratch/home"
cat >"$scratch/bin/cpio" <<'EOF'
#!/bin/sh
exec /usr/bin/cpio --no-absolute-filenames "$@"
EOF
chmod 0755 "$scratch/bin/cpio"
as_nobody=()
if [ "$(id -u)" = 0 ]; then
	chown -R nobody "$scratch"
	as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
fi
nobody_env=(env -i PATH="$scratch/bin:/usr/bin:/bin" HOME="$scratch/home" LANG=C.UTF-8 TMPDIR="$scratch")

step "lintian $(lintian --version | awk '{print $2}') on $(basename "$deb")"
if ! (cd "$scratch" && "${as_nobody[@]}" "${nobody_env[@]}" \
	lintian --display-info --fail-on error,warning "$(basename "$deb")"); then
	fail "lintian: errors or warnings (fix them, or override in packaging/lintian-overrides with a reason)"
fi

step "rpmlint on $(basename "$rpm")"
rpmlint_out=$(cd "$scratch" && "${as_nobody[@]}" "${nobody_env[@]}" \
	rpmlint -c rpmlint.toml "$(basename "$rpm")" 2>&1) || true
echo "$rpmlint_out"
grep -qE '[[:space:]]0 errors, 0 warnings' <<<"$rpmlint_out" ||
	fail "rpmlint: errors or warnings (fix them, or filter in packaging/rpmlint.toml with a reason)"

# --- 3. systemd-analyze verify ------------------------------------------------------------
step "systemd-analyze verify"
unitdir="$scratch/units"
mkdir -p "$unitdir" "$scratch/man/man1" "$scratch/man/man5" "$scratch/man/man8"
# The unit names /usr/bin/slicelet, which is not installed here: verify a copy that runs the
# binary make package just built, and find Documentation= man pages in the built pages.
sed "s|^ExecStart=/usr/bin/slicelet |ExecStart=$PWD/bin/slicelet |" packaging/slicelet.service >"$unitdir/slicelet.service"
grep -q "^ExecStart=$PWD/bin/slicelet run\$" "$unitdir/slicelet.service" || fail "slicelet.service: ExecStart is not /usr/bin/slicelet run"
cp build/package/man/*.1.gz "$scratch/man/man1/"
cp build/package/man/slicelet.toml.5.gz "$scratch/man/man5/"
cp build/package/man/*.8.gz "$scratch/man/man8/"
# The drop-in's [Slice] section, checked as a slice of its own.
cp packaging/system.slice.conf "$unitdir/slicelet-check.slice"
if ! out=$(MANPATH="$scratch/man" systemd-analyze verify "$unitdir/slicelet.service" "$unitdir/slicelet-check.slice" 2>&1) || [ -n "$out" ]; then
	echo "$out"
	fail "systemd-analyze verify is not clean"
fi

# --- 4. security exposure -------------------------------------------------------------------
# --offline=yes reads the unit file alone, so it needs no running systemd (systemd >= 250).
step "systemd-analyze security (offline)"
sec=$(systemd-analyze security --offline=yes --no-pager packaging/slicelet.service 2>&1) || true
echo "$sec" | grep -v '^✓' || true
exposure=$(sed -n 's/.*Overall exposure level for slicelet.service: \([0-9.]*\).*/\1/p' <<<"$sec")
if [ -z "$exposure" ]; then
	fail "systemd-analyze security printed no exposure level"
elif ! awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }'; then
	fail "slicelet.service exposure $exposure > $MAX_EXPOSURE"
else
	echo "exposure $exposure <= $MAX_EXPOSURE"
fi

# --- 5. the packaged configuration --------------------------------------------------------
step "slicelet config check --config packaging/config.toml"
bin/slicelet config check --config packaging/config.toml || fail "packaging/config.toml does not pass config check"

if [ "$failures" -gt 0 ]; then
	echo "package-check: $failures failure(s)" >&2
	exit 1
fi
echo "package-check: OK ($(basename "$deb"), $(basename "$rpm"), exposure $exposure)"
