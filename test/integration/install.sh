#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# install.sh - "make install" into a DESTDIR puts exactly the provider
# module (in libfabric's provider directory), the documented programs and
# the man page there, nothing else; "make uninstall" removes all of it.
set -u
build=${OPX_BUILD_DIR:?run from make check (OPX_BUILD_DIR)}
# not the outer "make check" overrides (TEST_LOGS=...): plain make runs
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
dest=$(mktemp -d "${TMPDIR:-/tmp}/opx-install.XXXXXX") || exit 1
trap 'rm -rf "$dest"' EXIT

# make_var NAME: a variable of the build's Makefile, fully expanded.
make_var() {
	printf 'opx-print-var:\n\t@echo $(%s)\n' "$1" |
		make -s --no-print-directory -C "$build" -f Makefile -f - opx-print-var | tail -n 1
}
provdir=$(make_var provdir)
bindir=$(make_var bindir)
mandir=$(make_var mandir)
expect=$(printf '%s\n' \
	"$provdir/libopx-fi.so" \
	"$bindir/opx_bw" \
	"$bindir/opx_msgrate" \
	"$bindir/opx_stats" \
	"$(make_var includedir)/rdma/opx_ext.h" \
	"$mandir/man7/fi_opx.7" | sort)

if ! make -s -C "$build" install DESTDIR="$dest" >"$dest.log" 2>&1; then
	echo "FAIL: make install"
	cat "$dest.log"
	rm -f "$dest.log"
	exit 1
fi
got=$(cd "$dest" && find . -type f -o -type l | sed 's|^\.||' | sort)
status=0
if [ "$got" != "$expect" ]; then
	echo "FAIL: installed files differ from the expected list"
	diff <(echo "$expect") <(echo "$got")
	status=1
else
	echo "PASS: make install: $(echo "$got" | wc -l) files"
fi
# The module exports only the libfabric entry point.
syms=$(nm -D --defined-only "$dest$provdir/libopx-fi.so" | awk '$2 == "T" {print $3}')
if [ "$syms" != fi_prov_ini ]; then
	echo "FAIL: module exports: $syms"
	status=1
fi

if ! make -s -C "$build" uninstall DESTDIR="$dest" >"$dest.log" 2>&1; then
	echo "FAIL: make uninstall"
	cat "$dest.log"
	status=1
fi
rm -f "$dest.log"
left=$(cd "$dest" && find . -type f -o -type l)
if [ -n "$left" ]; then
	echo "FAIL: left after make uninstall:"
	echo "$left"
	status=1
else
	echo "PASS: make uninstall left no file"
fi
exit $status
