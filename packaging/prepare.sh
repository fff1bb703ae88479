#!/bin/sh
# prepare.sh VERSION OUTDIR: the generated inputs of packaging/nfpm.yaml.
#   OUTDIR/man/*.gz        the man pages, gzip -9n (Debian policy 12.1: compressed, and -n keeps
#                          the build reproducible): slicectl(1) and slicelet(8) and their
#                          commands' pages generated from the binaries' command trees (their
#                          hidden __man command, dated SOURCE_DATE_EPOCH), slicelet.toml(5) from
#                          packaging/man;
#   OUTDIR/completion/     bash and zsh completions, from the same trees (completion bash|zsh);
#   OUTDIR/nfpm-rpm.yaml   packaging/nfpm.yaml with the rpm's %doc entries of the command pages;
#   OUTDIR/changelog.yml   packaging/changelog.yml with an entry for VERSION-1 on top when the
#                          newest entry is another version (a snapshot, like gbp dch --snapshot),
#                          dated and attributed from the commit being packaged.
set -eu
version=$1
out=$2
here=$(dirname "$0")

go=${GO:-go}
rm -rf "$out"
mkdir -p "$out/man" "$out/pages" "$out/completion"
# The generators run on this machine whatever GOOS/GOARCH the packages are for.
for cmd in slicectl slicelet; do
	GOOS= GOARCH= GOFLAGS= "$go" build -o "$out/$cmd" "./cmd/$cmd"
	"$out/$cmd" __man "$out/pages"
	"$out/$cmd" completion bash >"$out/completion/$cmd.bash"
	"$out/$cmd" completion zsh >"$out/completion/_$cmd"
	rm "$out/$cmd"
done
for page in "$here"/man/*.[0-9] "$out"/pages/*.[0-9]; do
	gzip -9nc "$page" >"$out/man/$(basename "$page").gz"
done
# The rpm's configuration: packaging/nfpm.yaml (whose last key is contents) with one %doc entry
# per generated command page.
{
	cat "$here/nfpm.yaml"
	for page in "$out"/pages/*.[0-9]; do
		name=$(basename "$page")
		printf '  - src: %s\n    dst: /usr/share/man/man%s/%s.gz\n    type: doc\n    packager: rpm\n    file_info: {mode: 0644}\n' \
			"$out/man/$name.gz" "${name##*.}" "$name"
	done
} >"$out/nfpm-rpm.yaml"
rm -r "$out/pages"

newest=$(sed -n 's/^- semver: //p' "$here/changelog.yml" | head -n 1)
if [ "$newest" = "$version-1" ]; then
	cp "$here/changelog.yml" "$out/changelog.yml"
	exit 0
fi
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
sha=$(git rev-parse --short=12 HEAD)
dirty=
if ! git diff --quiet HEAD -- 2>/dev/null; then
	dirty=", with uncommitted changes"
fi
{
	sed -n '/^#/p' "$here/changelog.yml"
	cat <<ENTRY
- semver: $version-1
  date: $date
  packager: slicelet maintainers <maintainers@slicelet.invalid>
  deb:
    urgency: medium
    distributions:
      - UNRELEASED
  changes:
    - note: Snapshot of commit $sha$dirty.
ENTRY
	sed '/^#/d' "$here/changelog.yml"
} >"$out/changelog.yml"
