#!/bin/sh
# Prints the package version for the .deb and .rpm, derived from `git describe`, in a form both
# Debian (deb-version(7)) and RPM accept and order correctly:
#
#   tag v1.2.3 on HEAD              1.2.3
#   5 commits after v1.2.3          1.2.3+git20261121.5.279d93f           (after 1.2.3, before 1.2.4)
#   no tag yet                      0.0.0~git20261121093000.279d93f       (before any 0.0.0)
#   uncommitted changes             ... .dirty appended
#
# The date is the commit's (UTC), not the build's, so a rebuild gives the same version, and it
# keeps snapshots ordered where abbreviated hashes are not: without a tag, to the second, so
# that two snapshots of one day upgrade in the order they were committed (a time-less
# 0.0.0~git20261121.<sha> of an earlier build sorts before every one of them). A leading "v" is dropped; "-" (the
# Debian revision and RPM release separator) never appears; "~" sorts before the empty string in
# both dpkg and rpm.
set -eu

describe=$(git describe --tags --long --match 'v[0-9]*' --dirty 2>/dev/null || true)
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d)
datetime=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
sha=$(git rev-parse --short=7 HEAD)
dirty=
if ! git diff --quiet HEAD -- 2>/dev/null; then
	dirty=.dirty
fi

if [ -z "$describe" ]; then
	echo "0.0.0~git${datetime}.${sha}${dirty}"
	exit 0
fi
describe=${describe%-dirty}
# vX.Y.Z[-rc1]-N-gSHA
rest=${describe%-*}         # vX.Y.Z[-rc1]-N
count=${rest##*-}           # N
tag=${rest%-*}              # vX.Y.Z[-rc1]
tag=${tag#v}
# A pre-release suffix (1.2.3-rc1) sorts before the release with "~" (1.2.3~rc1).
tag=$(printf '%s' "$tag" | sed 's/-/~/g')
case $tag in
[0-9]*) ;;
*) echo "version.sh: tag $tag does not start with a digit" >&2; exit 1 ;;
esac
if [ "$count" = 0 ]; then
	echo "${tag}${dirty}"
else
	echo "${tag}+git${date}.${count}.${sha}${dirty}"
fi
