#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-large.sh - large messages (16 KiB .. 16 MiB): opx against libfabric's
# own shm provider, and opx under Open MPI against Open MPI's vader, in one
# run on this host.
#
#   libfabric: test/bench/opx_bw  -m bw    streaming bandwidth (osu_bw-like,
#                                          window of 64 sends, ack per window)
#                                 -m bibw  both directions at once (osu_bibw)
#                                 -m lat   ping-pong, half round trip
#   MPI:       test/bench/mpi_bw.c (built here with mpicc), same three
#              measurements, pml cm + mtl ofi + FI_PROVIDER=opx against
#              pml ob1 + btl self,vader, 2 ranks, --bind-to core
#   reference: test/bench/memcpy_bw, one core copying the same sizes
#
# libfabric server and client are pinned to different cores (taskset -c 0 /
# -c 1).  Each figure is the best of BENCH_REPEAT runs: on a shared machine
# interference only ever makes a run slower.  Every run has a timeout and
# the script a deadline (~4.5 minutes); a run that fails, times out or
# reports bad data shows as "fail" in its cell (with the reason listed under
# the tables) and one that the deadline cut off as "skip" - never a hang.
# libfabric 1.17's shm provider has known bugs at some sizes; those cells
# say "fail" on purpose rather than being retried until they pass.
#
# Usage: scripts/bench-large.sh   (or "make bench-large" in a build
#        directory, or BENCH_LARGE=1 scripts/bench.sh)
# Environment:
#   OPX_BUILD_DIR         build directory (default: the current directory if
#                         it holds a build, else <repo>/build)
#   FI_PROVIDER_PATH      where libopx-fi.so is (default $OPX_BUILD_DIR/.libs)
#   BENCH_PROVS           providers to compare (default "opx shm"; the first
#                         is the numerator of the ratio)
#   BENCH_LARGE_SIZES     sizes in bytes (default 16 KiB .. 16 MiB, x4)
#   BENCH_LARGE_TARGET    seconds per measured phase (default 0.25)
#   BENCH_REPEAT          runs per figure, best reported (default 3)
#   BENCH_LARGE_MPI=0     skip the Open MPI part
#   BENCH_LARGE_DEADLINE  seconds for the whole script (default 270)
set -u

BENCH_NAME=bench-large.sh
# shellcheck source=scripts/bench-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"

SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIZES=${BENCH_LARGE_SIZES:-"16384 65536 262144 1048576 4194304 16777216"}
MODES="bw bibw lat"
TARGET=${BENCH_LARGE_TARGET:-0.25}
START=$SECONDS
DEADLINE=$((START + ${BENCH_LARGE_DEADLINE:-270}))
# The libfabric part stops early enough to leave the MPI part its time.
MPI_RESERVE=70
[ "${BENCH_LARGE_MPI:-1}" = 0 ] && MPI_RESERVE=0
RUN_TMO=25
MPI_TMO=100
PORT=48600
BW=$OPX_BUILD_DIR/test/bench/opx_bw
MEMCPY=$OPX_BUILD_DIR/test/bench/memcpy_bw

p0=${PROVS[0]}
p1=${PROVS[1]:-shm}

if [ ! -x "$BW" ]; then
	echo "bench-large.sh: $BW not built (run make in $OPX_BUILD_DIR)" >&2
	exit 1
fi
declare -A VAL      # "<prov>/<mode>/<size>" -> best figure, fail or skip
declare -A MPIVAL   # "<label>/<mode>/<size>" -> best figure, fail or skip
FAILURES=()
NOTES=()

# fabric_run PROV MODE SIZE: one opx_bw server/client pair on a fresh
# port; sets FIG to the figure (MBps, or usec for lat) and returns 0, or
# records the failure and returns 1.  Not meant for $(...): it updates
# PORT and FAILURES.
fabric_run() {
	local prov=$1 mode=$2 size=$3 out=$tmp/bw.$1.$2.$3 crc src line try
	FIG=
	for ((try = 0; try < 2; try++)); do
		fabric_pair "$prov" "$mode" "$size" "$out"
		crc=$? src=$SRV_RC
		# libfabric 1.17 shm names its region after the pid and fails
		# fi_enable with EBUSY when a killed process of the same pid left
		# one in /dev/shm: a property of the machine, not of the size
		# being measured, so run once more (with new pids) and say so.
		if { [ $crc -ne 0 ] || [ $src -ne 0 ]; } &&
			grep -q 'fi_enable: Device or resource busy' "$out" "$out.srv"; then
			NOTES+=("$prov $mode $size: EBUSY (stale region of a reused pid), rerun")
			continue
		fi
		# The out-of-band port sits in the ephemeral range, so another
		# program's connection can hold it: take the next port.
		if [ $src -ne 0 ] && grep -q 'Address already in use' "$out.srv"; then
			NOTES+=("$prov $mode $size: port in use, rerun on the next port")
			continue
		fi
		break
	done
	line=$(grep '^bw ' "$out" | tail -n 1)
	if [ $crc -ne 0 ] || [ $src -ne 0 ] || [ -z "$line" ]; then
		FAILURES+=("$prov $mode $size: client rc $crc, server rc $src: $(why "$out" "$out.srv")")
		return 1
	fi
	if [ "$mode" = lat ]; then
		FIG=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
	else
		FIG=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
	fi
	[ -n "$FIG" ]
}

# fabric_pair PROV MODE SIZE OUT: the processes of one run; returns the
# client's status and leaves the server's in SRV_RC.
fabric_pair() {
	local prov=$1 mode=$2 size=$3 out=$4 spid crc
	local args=(-p "$prov" -P "$PORT" -T $((RUN_TMO - 3)))
	timeout $RUN_TMO "${PIN_SRV[@]}" "$BW" "${args[@]}" >"$out.srv" 2>&1 &
	spid=$!
	if wait_listen "$PORT" "$spid"; then
		timeout $RUN_TMO "${PIN_CLI[@]}" "$BW" "${args[@]}" -m "$mode" -S "$size" \
			-t "$TARGET" 127.0.0.1 >"$out" 2>&1
		crc=$?
	else
		crc=1
		kill "$spid" 2>/dev/null
	fi
	wait "$spid"
	SRV_RC=$?
	PORT=$((PORT + 1))
	return $crc
}

echo "opx large-message benchmark: $(uname -n), $(nproc) cores, $pinning"
echo "libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?'), FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs on this machine slow every figure)"
echo

# ---- memcpy reference ---------------------------------------------------
if [ -x "$MEMCPY" ]; then
	# shellcheck disable=SC2086 # SIZES is a list
	timeout 60 "${PIN_CLI[@]}" "$MEMCPY" $SIZES >"$tmp/memcpy" 2>&1 ||
		FAILURES+=("memcpy_bw: $(why "$tmp/memcpy")")
fi
echo "memcpy, one core (test/bench/memcpy_bw, MB/s = 1e6 B/s, best of 5 trials):"
echo "  hot = same buffers every copy; rotating = distinct buffers over 64 MiB"
printf '%9s %12s %12s\n' size hot rotating
for size in $SIZES; do
	line=$(grep "^memcpy size=$size " "$tmp/memcpy" 2>/dev/null)
	a=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
	b=$(sed -n 's/.* MBps_rot=\([0-9.]*\).*/\1/p' <<<"$line")
	printf '%9s %12s %12s\n' "$size" "${a:-fail}" "${b:-fail}"
done
echo

# ---- libfabric: opx_bw, providers interleaved ----------------------------
# Interleaving the providers run by run spreads slow spells of a shared
# machine over both columns instead of penalising whichever ran second.
fab_deadline=$((DEADLINE - MPI_RESERVE))
nsizes=$(wc -w <<<"$SIZES")
isize=0
for size in $SIZES; do
	isize=$((isize + 1))
	echo "  [$isize/$nsizes] libfabric bw/bibw/lat at $size B" >&2
	for mode in $MODES; do
		for ((r = 0; r < REPEAT; r++)); do
			for prov in "$p0" "$p1"; do
				key=$prov/$mode/$size
				[ "${VAL[$key]:-}" = fail ] && continue
				if [ $SECONDS -ge $fab_deadline ]; then
					[ -z "${VAL[$key]:-}" ] && VAL[$key]=skip
					continue
				fi
				if fabric_run "$prov" "$mode" "$size"; then
					VAL[$key]=$(better "$(kind "$mode")" "${VAL[$key]:-}" "$FIG")
				else
					VAL[$key]=fail
				fi
			done
		done
	done
done

fabric_table() {
	local mode=$1 title=$2 size a b
	echo "$title"
	printf '%9s %12s %12s %10s\n' size "$p0" "$p1" "$p0/$p1"
	: >"$BENCH_OUT/large-$mode.dat"
	for size in $SIZES; do
		a=${VAL[$p0/$mode/$size]:-skip}
		b=${VAL[$p1/$mode/$size]:-skip}
		printf '%9s %12s %12s %10s\n' "$size" "$a" "$b" "$(ratio "$a" "$b")"
		bench_dat "large-$mode" "$size" "$a" "$b"
	done
	echo
	bench_plot "large-$mode" "$title" "$([ "$mode" = lat ] && echo usec || echo MB/s)" "$p0" "$p1"
}
fabric_table bw "bandwidth: opx_bw -m bw, window 64, MB/s, best of $REPEAT"
fabric_table bibw "bidirectional bandwidth: opx_bw -m bibw, window 64, MB/s (both directions), best of $REPEAT"
fabric_table lat "latency: opx_bw -m lat, usec one way (half round trip), best of $REPEAT"

# ---- Open MPI: opx through pml cm / mtl ofi against ob1 / vader ----------
mpi_table() {
	local mode=$1 title=$2 size a b
	echo "$title"
	printf '%9s %12s %12s %10s\n' size "MPI $p0" "MPI vader" ratio
	: >"$BENCH_OUT/large-mpi-$mode.dat"
	for size in $SIZES; do
		a=${MPIVAL[$p0/$mode/$size]:-skip}
		b=${MPIVAL[vader/$mode/$size]:-skip}
		printf '%9s %12s %12s %10s\n' "$size" "$a" "$b" "$(ratio "$a" "$b")"
		bench_dat "large-mpi-$mode" "$size" "$a" "$b"
	done
	echo
	bench_plot "large-mpi-$mode" "$title" "$([ "$mode" = lat ] && echo usec || echo MB/s)" \
		"MPI $p0" "MPI vader"
}

# mpi_run LABEL MPIRUN-ARGS...: one mpirun of mpi_bw over all sizes and
# modes; folds its lines into MPIVAL, marking the missing ones "fail".
mpi_run() {
	local label=$1 out=$tmp/mpi.$1 rc mode size line v key
	shift
	timeout -k 5 $MPI_TMO mpirun -np 2 --bind-to core "${MPI_ROOT[@]}" "$@" \
		"$MPI_BW" -l "$label" -t "$TARGET" -T $((MPI_TMO - 10)) \
		-s "${SIZES// /,}" >"$out" 2>&1
	rc=$?
	[ $rc -ne 0 ] && FAILURES+=("MPI $label: mpirun rc $rc: $(why "$out")")
	for size in $SIZES; do
		for mode in $MODES; do
			key=$label/$mode/$size
			line=$(grep "^mpi label=$label mode=$mode size=$size " "$out" | tail -n 1)
			if [ "$mode" = lat ]; then
				v=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
			else
				v=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
			fi
			if [ -z "$v" ]; then
				MPIVAL[$key]=fail
			elif [ "${MPIVAL[$key]:-}" != fail ]; then
				MPIVAL[$key]=$(better "$(kind "$mode")" "${MPIVAL[$key]:-}" "$v")
			fi
		done
	done
}

if [ "${BENCH_LARGE_MPI:-1}" != 0 ]; then
	MPI_BW=$OPX_BUILD_DIR/test/bench/mpi_bw
	MPI_ROOT=()
	[ "$(id -u)" = 0 ] && MPI_ROOT=(--allow-run-as-root)
	if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
		echo "Open MPI: mpicc/mpirun not found, skipped"
		echo
	elif ! mkdir -p "$(dirname "$MPI_BW")" ||
		! mpicc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$MPI_BW" \
			"$SRC_DIR/test/bench/mpi_bw.c" >"$tmp/mpicc" 2>&1; then
		echo "Open MPI: cannot build mpi_bw:"
		sed 's/^/  /' "$tmp/mpicc"
		echo
	else
		# Debian's openmpi-mca-params.conf has "mtl = ^ofi"; the command
		# line wins.
		for ((r = 0; r < REPEAT; r++)); do
			echo "  [MPI run $((r + 1))/$REPEAT] opx, then vader" >&2
			# A run needs about 15 s; do not start one that cannot finish.
			[ $((SECONDS + 20)) -ge $DEADLINE ] && break
			mpi_run "$p0" -mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include "$p0" \
				-mca btl self -x "FI_PROVIDER=$p0" -x FI_PROVIDER_PATH
			[ $((SECONDS + 20)) -ge $DEADLINE ] && break
			mpi_run vader -mca pml ob1 -mca btl self,vader
		done
		mpi_table bw "MPI bandwidth (osu_bw-like, window 64), MB/s, best of $REPEAT mpirun"
		mpi_table bibw "MPI bidirectional bandwidth (osu_bibw-like), MB/s, best of $REPEAT mpirun"
		mpi_table lat "MPI latency (osu_latency-like), usec one way, best of $REPEAT mpirun"
	fi
fi

if [ ${#FAILURES[@]} -gt 0 ]; then
	echo "failures (a cell marked fail is the first failing run's):"
	printf '  %s\n' "${FAILURES[@]}" | awk '!seen[$0]++'
	echo
fi
if [ ${#NOTES[@]} -gt 0 ]; then
	echo "notes:"
	printf '  %s\n' "${NOTES[@]}"
	echo
fi
echo "(bw/bibw ratio > 1 means $p0 is faster; latency ratio < 1 means $p0 is faster)"
bench_plots_done
echo "elapsed $((SECONDS - START))s"
