#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# mpich-suite.sh - MPICH's own test suite (test/mpi of the source that
# scripts/mpich-build.sh built) over opx: builds the programs of each
# directory asked for, runs every line of its testlist with MPICH's
# mpiexec and reports each job that did not print "No Errors".  Not part
# of "make check" (the rma directory alone takes about 5 minutes here).
#
#   scripts/mpich-suite.sh [DIR...]     default: pt2pt rma coll datatype
#                                       threads/pt2pt threads/comm threads/rma
#   MPICH_SUITE_NP=4       at most this many ranks per job (lines asking
#                          for more run with this many: tests that need
#                          their own count then fail, and say so)
#   MPICH_SUITE_TIMEOUT=90 seconds per job (a line's own timeLimit wins
#                          when it is larger)
#   FI_OPX_WIRE=udp        as for any opx job: the udp wire on one host
#   OPX_MPICH_DIR          the cache (as scripts/mpich-build.sh)
#   OPX_BUILD_DIR          where .libs/libopx-fi.so is (default: build)
# Every job gets its own FI_OPX_UUID and runs with MPIR_CVAR_NOLOCAL=1
# (otherwise MPICH moves on-host traffic through its own shared memory).
# Lines marked xfail in the list are skipped.  Exit 0 when every job
# passed, 1 otherwise.
set -u
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${OPX_MPICH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opx-mpich}
src=
for d in "$cache"/src/mpich-*/test/mpi; do
	[ -d "$d" ] && src=$d && break
done
bld=$cache/build/test/mpi
mpiexec=$cache/install/bin/mpiexec
lib=${FI_PROVIDER_PATH:-${OPX_BUILD_DIR:-$top/build}/.libs}
npmax=${MPICH_SUITE_NP:-4}
tmo=${MPICH_SUITE_TIMEOUT:-90}

if [ ! -x "$mpiexec" ] || [ -z "$src" ] || [ ! -d "$bld" ]; then
	echo "mpich-suite.sh: no MPICH build in $cache (bash scripts/mpich-build.sh)" >&2
	exit 1
fi
if [ ! -e "$lib/libopx-fi.so" ]; then
	echo "mpich-suite.sh: no $lib/libopx-fi.so (set OPX_BUILD_DIR)" >&2
	exit 1
fi
export FI_PROVIDER=opx FI_PROVIDER_PATH=$lib MPIR_CVAR_NOLOCAL=1
[ $# -gt 0 ] || set -- pt2pt rma coll datatype threads/pt2pt threads/comm threads/rma

total_pass=0 total_fail=0
for dir in "$@"; do
	if ! make -s -C "$bld/util" >/dev/null 2>&1 || ! make -s -C "$bld/$dir" >/dev/null 2>&1; then
		echo "FAIL: $dir: the programs do not build (make -C $bld/$dir)"
		total_fail=$((total_fail + 1))
		continue
	fi
	list=$bld/$dir/testlist
	[ -f "$list" ] || list=$src/$dir/testlist
	pass=0 fail=0 start=$SECONDS
	while read -r name np rest; do
		case $name in '' | '#'*) continue ;; esac
		# a subdirectory of the list, or a program this build has not
		if [ ! -f "$bld/$dir/$name" ] || [ ! -x "$bld/$dir/$name" ]; then
			continue
		fi
		[[ $np =~ ^[0-9]+$ ]] || continue
		args=() envs=() skip=0 limit=$tmo
		for t in $rest; do
			case $t in
			arg=*) args+=("${t#arg=}") ;;
			env=*) envs+=("${t#env=}") ;;
			xfail=*) skip=1 ;;
			timeLimit=*) [ "${t#timeLimit=}" -gt "$limit" ] 2>/dev/null && limit=${t#timeLimit=} ;;
			esac
		done
		[ $skip = 1 ] && continue
		[ "$np" -gt "$npmax" ] && np=$npmax
		out=$(cd "$bld/$dir" && env "${envs[@]}" FI_OPX_UUID="$(cat /proc/sys/kernel/random/uuid)" \
			timeout -k 10 "$limit" "$mpiexec" -n "$np" "./$name" "${args[@]}" </dev/null 2>&1)
		rc=$?
		if [ $rc = 0 ] && grep -qi "No Errors" <<<"$out"; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			why="exit $rc"
			[ $rc = 124 ] && why="over its $limit s"
			echo "FAIL: $dir/$name -n $np ${args[*]} ${envs[*]} ($why)"
			tail -n 4 <<<"$out" | sed 's/^/    /'
		fi
	done <"$list"
	echo "$dir: $pass passed, $fail failed ($((SECONDS - start)) s)"
	total_pass=$((total_pass + pass))
	total_fail=$((total_fail + fail))
done
echo "mpich-suite.sh: $total_pass passed, $total_fail failed${FI_OPX_WIRE:+ (FI_OPX_WIRE=$FI_OPX_WIRE)}"
[ $total_fail = 0 ]
