#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# debian.sh - the Debian package: dpkg-buildpackage builds libfabric-opx
# from the files a release holds (git ls-files, or make distdir); its file
# list is exactly the module in libfabric's provider directory, the
# programs and the man page; lintian reports no error; and (as root)
# installing it makes "fi_info -p opx" work with no FI_PROVIDER_PATH, and
# removing it takes the provider away.
# Skipped (exit 77) with the reason where the tools are missing.
set -u
src=${OPX_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
for t in dpkg-buildpackage dh dpkg-deb; do
	if ! command -v $t >/dev/null 2>&1; then
		echo "SKIP: $t not found (Debian packages dpkg-dev, debhelper)"
		exit 77
	fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/opx-deb.XXXXXX") || exit 1
installed=0
cleanup() {
	[ $installed = 1 ] && dpkg -r libfabric-opx >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

# The package is built from exactly what a release holds, never from a
# copy of the work tree: an in-tree build leaves Makefiles, objects,
# .deps/, test logs and .trs files next to the sources.  In a git
# checkout that is "git ls-files" (taken from the work tree, so edits to
# tracked files not yet committed are included); otherwise (a release
# tarball) what "make distdir" of the build tree produces.
mkdir "$work/opx"
src=$(cd "$src" && pwd -P) || exit 1
if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$src" ]; then
	echo "# package source: git ls-files of $src"
	# a tracked file deleted in the work tree is not part of it any more
	if ! (set -o pipefail
		cd "$src" && git ls-files -z --cached --recurse-submodules |
			while IFS= read -r -d '' f; do
				if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
			done | tar --null --no-recursion -T - -cf "$work/src.tar") ||
		! tar -C "$work/opx" -xf "$work/src.tar"; then
		echo "FAIL: cannot archive the git ls-files of $src"
		exit 1
	fi
else
	build=${OPX_BUILD_DIR:-}
	[ -z "$build" ] && [ -f "$src/Makefile" ] && build=$src
	if [ -z "$build" ] || [ ! -f "$build/Makefile" ]; then
		echo "FAIL: $src is not a git checkout and there is no configured build" \
			"tree to run \"make distdir\" in (set OPX_BUILD_DIR)"
		exit 1
	fi
	echo "# package source: make distdir of $build"
	rmdir "$work/opx"
	# Not the outer make's flags (see below): a clean make of one target.
	if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
		make -C "$build" distdir distdir="$work/opx" top_distdir="$work/opx" \
		>"$work/distdir.log" 2>&1 || [ ! -f "$work/opx/debian/rules" ]; then
		echo "FAIL: make distdir"
		tail -n 20 "$work/distdir.log"
		exit 1
	fi
fi
echo "# dpkg-buildpackage -us -uc -b (log: $work/build.log)"
# Run from "make check", MAKEFLAGS carries the outer make's overrides
# (TEST_LOGS=...): the package build's own "make check-unit" would run
# the whole outer suite again.  Build as if from a clean shell, on all
# cores (debhelper passes parallel=N on to the build and to the package's
# own unit tests; a serial build took 4 minutes of CI's 2 cores).
if ! (cd "$work/opx" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES \
	DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$(nproc)}" \
	dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
	echo "FAIL: dpkg-buildpackage"
	tail -n 40 "$work/build.log"
	# the package's unit tests: which failed, and their own logs
	grep -E '^(FAIL|ERROR):' "$work/build.log"
	for l in "$work"/opx/debian/build/test/unit/*.log; do
		[ -e "$l" ] && grep -qE ':test-result: (FAIL|ERROR)' "${l%.log}.trs" 2>/dev/null &&
			{ echo "--- $l"; tail -n 30 "$l"; }
	done
	exit 1
fi
deb=$(ls "$work"/libfabric-opx_*.deb 2>/dev/null | head -n 1)
if [ -z "$deb" ]; then
	echo "FAIL: no libfabric-opx .deb was built"
	exit 1
fi
status=0
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' | sort)
expect=$(printf '%s\n' \
	"usr/bin/opx_bw" "usr/bin/opx_msgrate" "usr/bin/opx_stats" \
	"usr/include/rdma/opx_ext.h" \
	"usr/lib/$multi/libfabric/libopx-fi.so" \
	"usr/share/doc/libfabric-opx/changelog.gz" \
	"usr/share/doc/libfabric-opx/copyright" \
	"usr/share/man/man7/fi_opx.7.gz" | sort)
if [ "$files" != "$expect" ]; then
	echo "FAIL: package file list differs from the expected one"
	diff <(echo "$expect") <(echo "$files")
	status=1
else
	echo "PASS: $(basename "$deb"): $(echo "$files" | wc -l) files"
fi

if command -v lintian >/dev/null 2>&1; then
	lintian "$deb" >"$work/lintian.log" 2>&1
	[ -n "${OPX_DEB_VERBOSE:-}" ] && cat "$work/lintian.log"
	if grep -q '^E:' "$work/lintian.log"; then
		echo "FAIL: lintian errors:"
		grep '^E:' "$work/lintian.log"
		status=1
	else
		echo "PASS: lintian: no error ($(grep -c '^W:' "$work/lintian.log") warnings)"
	fi
else
	echo "note: lintian not installed, not run"
fi

if [ "$(id -u)" != 0 ]; then
	echo "note: not root: install/remove check skipped"
	exit $status
fi
if dpkg-query -W -f='${Status}' libfabric-opx 2>/dev/null | grep -q 'install ok'; then
	echo "note: libfabric-opx already installed on this machine: install/remove check skipped"
	exit $status
fi
if ! dpkg -i "$deb" >"$work/dpkg.log" 2>&1; then
	echo "FAIL: dpkg -i"
	cat "$work/dpkg.log"
	exit 1
fi
installed=1
if env -u FI_PROVIDER_PATH fi_info -p opx >"$work/fi_info.log" 2>&1 &&
   grep -q 'provider: opx' "$work/fi_info.log"; then
	echo "PASS: installed package: fi_info -p opx finds the provider without FI_PROVIDER_PATH"
else
	echo "FAIL: installed package: fi_info -p opx:"
	head -n 5 "$work/fi_info.log"
	status=1
fi
dpkg -r libfabric-opx >/dev/null 2>&1 && installed=0
if env -u FI_PROVIDER_PATH fi_info -p opx >/dev/null 2>&1; then
	echo "FAIL: fi_info still finds opx after dpkg -r"
	status=1
else
	echo "PASS: dpkg -r removed the provider"
fi
exit $status
