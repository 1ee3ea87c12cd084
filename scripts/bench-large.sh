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
# "<prov>/<mode>/<size>" and "mpi/<label>/<mode>/<size>" -> best figure,
# fail or skip
declare -A VAL

# fabric_run PROV MODE SIZE: one opx_bw server/client pair (bench_pair);
# sets FIG to the figure (MBps, or usec for lat) and returns 0, or records
# the failure and returns 1.  Not meant for $(...): it updates PORT,
# FAILURES and NOTES.
fabric_run() {
	local prov=$1 mode=$2 size=$3 out=$tmp/bw.$1.$2.$3 line PAIR_WHAT="$1 $2 $3"
	local args=(-p "$prov" -P @PORT@ -T $((RUN_TMO - 3)))
	FIG=
	bench_pair "$out" $RUN_TMO "$BW" "${args[@]}" -- \
		"$BW" "${args[@]}" -m "$mode" -S "$size" -t "$TARGET" 127.0.0.1
	line=$(grep '^bw ' "$out" | tail -n 1)
	if [ $CRC -ne 0 ] || [ $SRC -ne 0 ] || [ -z "$line" ]; then
		FAILURES+=("$prov $mode $size: client rc $CRC, server rc $SRC: $(why "$out" "$out.srv")")
		return 1
	fi
	if [ "$mode" = lat ]; then
		FIG=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
	else
		FIG=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
	fi
	[ -n "$FIG" ]
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

# fabric_table MODE TITLE: p0 against p1 at every size.
fabric_table() {
	table "$2" "large-$1" - "$SIZES" "$p0/$1/@SIZE@" "$p1/$1/@SIZE@" -- size "$p0" "$p1" -- "$p0/$p1"
	bench_plot "large-$1" "$2" "$([ "$1" = lat ] && echo usec || echo MB/s)" "$p0" "$p1"
}
fabric_table bw "bandwidth: opx_bw -m bw, window 64, MB/s, best of $REPEAT"
fabric_table bibw "bidirectional bandwidth: opx_bw -m bibw, window 64, MB/s (both directions), best of $REPEAT"
fabric_table lat "latency: opx_bw -m lat, usec one way (half round trip), best of $REPEAT"

# ---- Open MPI: opx through pml cm / mtl ofi against ob1 / vader ----------
# mpi_table MODE TITLE: opx under Open MPI against vader.
mpi_table() {
	table "$2" "large-mpi-$1" - "$SIZES" "mpi/$p0/$1/@SIZE@" "mpi/vader/$1/@SIZE@" -- \
		size "MPI $p0" "MPI vader" -- ratio
	bench_plot "large-mpi-$1" "$2" "$([ "$1" = lat ] && echo usec || echo MB/s)" "MPI $p0" "MPI vader"
}

# The bench-common.sh mpi_run hooks: one mpirun of mpi_bw over all sizes
# and modes, pml cm + mtl ofi on p0 or ob1 + vader.
MPI_LABELS=("$p0" vader)
# shellcheck disable=SC2054 # commas belong to MCA values (self,vader)
mpi_cmd() {
	if [ "$1" = vader ]; then
		CMD=(-mca pml ob1 -mca btl self,vader)
	else
		CMD=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include "$1"
			-mca btl self -x "FI_PROVIDER=$1" -x FI_PROVIDER_PATH)
	fi
	CMD=(mpirun -np 2 --bind-to core "${MPI_ROOT[@]}" "${CMD[@]}"
		"$MPI_BW" -l "$1" -t "$TARGET" -s "${SIZES// /,}")
}
mpi_points() {
	local size mode
	for size in $SIZES; do
		for mode in $MODES; do echo "$mode/$size"; done
	done
}
mpi_point() {
	local mode=${2%/*} size=${2#*/}
	KEY=mpi/$1/$2 KIND=$(kind "$mode") WHAT="$mode $size"
	V=$(mpi_fig "$3" "^mpi label=$1 mode=$mode size=$size " "$([ "$mode" = lat ] && echo usec || echo MBps)")
}

if [ "${BENCH_LARGE_MPI:-1}" != 0 ]; then
	MPI_BW=$OPX_BUILD_DIR/test/bench/mpi_bw
	if mpi_build mpi_bw "$MPI_BW"; then
		# Debian's openmpi-mca-params.conf has "mtl = ^ofi"; the command
		# line wins.  A run needs about 15 s; do not start one that
		# cannot finish.
		mpi_runs 20
		mpi_table bw "MPI bandwidth (osu_bw-like, window 64), MB/s, best of $REPEAT mpirun"
		mpi_table bibw "MPI bidirectional bandwidth (osu_bibw-like), MB/s, best of $REPEAT mpirun"
		mpi_table lat "MPI latency (osu_latency-like), usec one way, best of $REPEAT mpirun"
	fi
fi

bench_footer "failures (a cell marked fail is the first failing run's):"
echo "(bw/bibw ratio > 1 means $p0 is faster; latency ratio < 1 means $p0 is faster)"
bench_plots_done
echo "elapsed $((SECONDS - START))s"
