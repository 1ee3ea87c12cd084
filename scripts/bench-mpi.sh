#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-mpi.sh - opx under Open MPI against Open MPI's own shared memory
# (ob1 + vader) and libfabric's shm provider, same host, same run, at
# every size an MPI application sends.
#
# Point to point (test/bench/mpi_bw.c, 2 ranks bound to cores 0 and 1):
#   latency (osu_latency-like), bandwidth (osu_bw-like, window 64),
#   bidirectional bandwidth (osu_bibw-like) and message rate (the bw run's
#   messages per second), at every power of two from 1 B to 4 MiB and one
#   byte either side of each protocol threshold (inline 16 B, packet 8 KiB,
#   split copy 32 KiB).
# Collectives (test/bench/mpi_collbench.c): allreduce, alltoall, bcast and
#   an IMB-style neighbour exchange at 2 ranks and at 4 ranks; then
#   allreduce and the exchange of 64 KiB at 8 and 16 ranks, many more ranks
#   than cores, which shows how well waiting ranks yield the CPU.
# Start: how long a 2-rank job takes from mpirun to exit (one 4-byte
#   allreduce in between), and how long its slowest rank spent in MPI_Init.
#
# Every figure is the best of BENCH_REPEAT mpirun runs (interference only
# slows a run down).  Each table has opx/vader and opx/shm ratios and
# flags with "<" every size where opx is slower than vader.  With gnuplot
# installed, PNG plots land beside the tables (BENCH_OUT).
#
# Usage: scripts/bench-mpi.sh        (or "make bench" in a build directory)
# Environment:
#   OPX_BUILD_DIR          build directory (see bench-common.sh)
#   BENCH_MPI_STACKS       stacks to compare (default "opx vader shm"; opx first)
#   BENCH_MPI_SIZES        point-to-point sizes (default above)
#   BENCH_MPI_COLL_SIZES   collective sizes (default "8 64 128 1024 65536")
#   BENCH_MPI_NPS          collective rank counts (default "2 4")
#   BENCH_MPI_OVERSUB      oversubscribed rank counts for allreduce and the
#                          neighbour exchange at 64 KiB (default "8 16")
#   BENCH_MPI_TARGET       seconds per measured phase (default 0.1)
#   BENCH_REPEAT           runs per figure (default 3)
#   BENCH_MPI_DEADLINE     seconds for the whole script (default 600)
#   BENCH_OUT              where tables and plots are written (default
#                          $OPX_BUILD_DIR/bench-results)
set -u

BENCH_NAME=bench-mpi.sh
# shellcheck source=scripts/bench-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"

SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
read -r -a STACKS <<<"${BENCH_MPI_STACKS:-opx vader shm}"
pow2=""
for ((s = 1; s <= 4194304; s *= 2)); do pow2="$pow2 $s"; done
SIZES=${BENCH_MPI_SIZES:-$(printf '%s\n' $pow2 15 17 8191 8193 32767 32769 | sort -n | tr '\n' ' ')}
COLL_SIZES=${BENCH_MPI_COLL_SIZES:-"8 64 128 1024 65536"}
NPS=${BENCH_MPI_NPS:-"2 4"}
OVERSUB=${BENCH_MPI_OVERSUB:-"8 16"}
TARGET=${BENCH_MPI_TARGET:-0.1}
START=$SECONDS
DEADLINE=$((START + ${BENCH_MPI_DEADLINE:-600}))
MPI_TMO=240
OUT=$BENCH_OUT # bench-common.sh: <build>/bench-results unless BENCH_OUT says
BIN=$OPX_BUILD_DIR/test/bench
declare -A VAL # "<stack>/<mode>/<size>" or "<stack>/<op>/np<N>/<size>"
FAILURES=()

if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
	echo "bench-mpi.sh: mpicc/mpirun not found (Debian packages openmpi-bin libopenmpi-dev)" >&2
	exit 1
fi
mkdir -p "$BIN" "$OUT" || exit 1
for p in mpi_bw mpi_collbench; do
	if ! mpicc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$BIN/$p" \
		"$SRC_DIR/test/bench/$p.c" >"$tmp/mpicc" 2>&1; then
		echo "bench-mpi.sh: cannot build $p:" >&2
		cat "$tmp/mpicc" >&2
		exit 1
	fi
done
# libfabric's own start-up cost (test/bench/fi_load.c), printed under the
# job start table: it lands in MPI_Init for every libfabric stack alike.
FI_LOAD=$BIN/fi_load
gcc -std=c11 -O2 -o "$FI_LOAD" "$SRC_DIR/test/bench/fi_load.c" -ldl 2>/dev/null || FI_LOAD=
# shm advertises neither FI_LOCAL_COMM nor FI_REMOTE_COMM, which the ofi
# MTL requests: the test suite's preload adds them (see its comment).
SHM_PRELOAD=$BIN/fi_local_only_preload.so
gcc -std=c11 -D_GNU_SOURCE -shared -fPIC -o "$SHM_PRELOAD" \
	"$SRC_DIR/test/mpi/fi_local_only_preload.c" -lfabric -ldl 2>/dev/null || SHM_PRELOAD=

# stack_args STACK: the mpirun options that select it (in ARGS).  The
# libfabric stacks get only the self BTL: pml cm does not use BTLs, and
# Open MPI 4.1's ofi BTL, if opened, sleeps a second in MPI_Finalize.
stack_args() {
	case $1 in
	vader) ARGS=(-mca pml ob1 -mca btl self,vader) ;;
	shm)
		ARGS=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include shm -mca btl self
		      -x FI_PROVIDER=shm)
		[ -n "$SHM_PRELOAD" ] && ARGS+=(-x "LD_PRELOAD=$SHM_PRELOAD")
		;;
	*)
		ARGS=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include "$1" -mca btl self
		      -x "FI_PROVIDER=$1" -x FI_PROVIDER_PATH)
		;;
	esac
}

p2p_run() {
	local st=$1 out=$tmp/p2p.$1 rc size line v
	stack_args "$st"
	timeout -k 5 $MPI_TMO mpirun -np 2 --bind-to core "${MPI_ROOT[@]}" "${ARGS[@]}" \
		"$BIN/mpi_bw" -l "$st" -t "$TARGET" -T $((MPI_TMO - 10)) \
		-s "$(echo $SIZES | tr ' ' ',')" >"$out" 2>&1
	rc=$?
	[ $rc -ne 0 ] && FAILURES+=("$st point-to-point: mpirun rc $rc: $(grep -v '^mpi ' "$out" | tail -n 1 | cut -c 1-100)")
	for size in $SIZES; do
		line=$(grep "^mpi label=$st mode=lat size=$size " "$out" | tail -n 1)
		v=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
		[ -n "$v" ] && keep "$st/lat/$size" min "$v"
		for mode in bw bibw; do
			line=$(grep "^mpi label=$st mode=$mode size=$size " "$out" | tail -n 1)
			v=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
			[ -z "$v" ] && continue
			keep "$st/$mode/$size" max "$v"
			# messages per second of the one-way stream
			[ $mode = bw ] && keep "$st/rate/$size" max \
				"$(awk -v m="$v" -v s="$size" 'BEGIN { printf "%.0f", m * 1e6 / s }')"
		done
	done
}

# coll_run STACK NP [OPS SIZES]: one mpirun of mpi_collbench.
coll_run() {
	local st=$1 np=$2 ops=${3:-allreduce,alltoall,bcast,exchange} sizes=${4:-$COLL_SIZES}
	local out=$tmp/coll.$1.$2 rc line op size v
	stack_args "$st"
	timeout -k 5 $MPI_TMO mpirun -np "$np" --oversubscribe --bind-to none "${MPI_ROOT[@]}" \
		"${ARGS[@]}" "$BIN/mpi_collbench" -l "$st" -t "$TARGET" -T $((MPI_TMO - 10)) \
		-o "$ops" -s "$(echo $sizes | tr ' ' ',')" >"$out" 2>&1
	rc=$?
	[ $rc -ne 0 ] && FAILURES+=("$st collectives np=$np: mpirun rc $rc: $(grep -v '^coll ' "$out" | tail -n 1 | cut -c 1-100)")
	while read -r line; do
		op=$(sed -n 's/.* op=\([a-z]*\) .*/\1/p' <<<"$line")
		size=$(sed -n 's/.* size=\([0-9]*\) .*/\1/p' <<<"$line")
		v=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
		[ -n "$op" ] && [ -n "$v" ] && keep "$st/$op/np$np/$size" min "$v"
	done < <(grep "^coll label=$st " "$out")
}

# start_run STACK: wall time of a minimal 2-rank job, and its MPI_Init.
start_run() {
	local st=$1 out=$tmp/start.$1 rc t0 t1 v t line
	stack_args "$st"
	t0=$(date +%s%N)
	timeout -k 5 $MPI_TMO mpirun -np 2 --bind-to core "${MPI_ROOT[@]}" "${ARGS[@]}" \
		"$BIN/mpi_collbench" -l "$st" -t 0.001 -T $((MPI_TMO - 10)) -o allreduce -s 4 \
		>"$out" 2>&1
	rc=$?
	t1=$(date +%s%N)
	if [ $rc -ne 0 ]; then
		FAILURES+=("$st start: mpirun rc $rc: $(tail -n 1 "$out" | cut -c 1-100)")
		return
	fi
	keep "$st/start/mpirun" min "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
	v=$(sed -n 's/^start label=.* init_s=\([0-9.]*\).*/\1/p' "$out")
	[ -n "$v" ] && keep "$st/start/MPI_Init" min "$(awk -v a="$v" 'BEGIN { printf "%.3f", a }')"
	[ "$st" = vader ] || [ -z "$FI_LOAD" ] && return
	line=$(FI_PROVIDER=$st "$FI_LOAD" 2>/dev/null)
	for v in dlopen getinfo; do
		t=$(sed -n "s/.* ${v}_s=\([0-9.]*\).*/\1/p" <<<"$line")
		[ -n "$t" ] && keep "$st/fiload/$v" min "$t"
	done
}

# libfabric_note: under the job start table, what libfabric itself costs
# before any provider runs.  Loading it runs the constructors of what it
# links (Debian's links libpsm2 and libinfinipath, about 0.1 s each here),
# and its first fi_getinfo initializes every built-in provider (verbs
# reads /proc/kallsyms).  The shm stack's LD_PRELOAD loads libfabric
# before MPI_Init starts, so only its fi_getinfo part is in its MPI_Init.
libfabric_note() {
	local st line=""
	for st in "${STACKS[@]}"; do
		[ -n "${VAL[$st/fiload/dlopen]:-}" ] || continue
		line="$line, $st ${VAL[$st/fiload/dlopen]} + ${VAL[$st/fiload/getinfo]:-?}"
	done
	[ -n "$line" ] || return
	echo "libfabric itself, before any provider code (loading libfabric.so.1 + its first"
	echo "fi_getinfo, seconds, test/bench/fi_load.c)${line#,}."
	echo "MPI_Init of a libfabric stack includes both; shm's preload loads libfabric"
	echo "before MPI_Init, so the mpirun row is the one that compares them."
	echo
}

echo "opx MPI benchmark: $(uname -n), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Open MPI $(mpirun --version 2>/dev/null | head -n 1 | awk '{print $NF}'), stacks: ${STACKS[*]}, best of $REPEAT"
echo "(opx = pml cm + mtl ofi + FI_PROVIDER=opx; vader = pml ob1 + btl vader; shm = libfabric shm via mtl ofi)"
echo
total=$((REPEAT * ${#STACKS[@]} * (2 + $(wc -w <<<"$NPS $OVERSUB"))))
n=0
for ((r = 0; r < REPEAT; r++)); do
	for st in "${STACKS[@]}"; do
		[ $SECONDS -ge $DEADLINE ] && break 2
		n=$((n + 1))
		echo "  [$n/$total] job start, $st, run $((r + 1))" >&2
		start_run "$st"
		n=$((n + 1))
		echo "  [$n/$total] point to point, $st, run $((r + 1))" >&2
		p2p_run "$st"
		for np in $NPS; do
			[ $SECONDS -ge $DEADLINE ] && break 3
			n=$((n + 1))
			echo "  [$n/$total] collectives np=$np, $st, run $((r + 1))" >&2
			coll_run "$st" "$np"
		done
		for np in $OVERSUB; do
			[ $SECONDS -ge $DEADLINE ] && break 3
			n=$((n + 1))
			echo "  [$n/$total] oversubscribed np=$np, $st, run $((r + 1))" >&2
			coll_run "$st" "$np" allreduce,exchange 65536
		done
	done
done

# mtable TITLE BETTER ROW-KEY-PREFIX SIZES FILE: one row per size, one
# column per stack, then opx/<other> ratios; "<" marks opx slower than
# vader.  Also writes the table as data for the plot (FILE.dat).
TABLE_W=(9 12 11)
TABLE_WORSE="slower than vader"
TABLE_REF=0
for ((i = 1; i < ${#STACKS[@]}; i++)); do [ "${STACKS[$i]}" = vader ] && TABLE_REF=$i; done
mtable() {
	local keys=() ratios=() st k=$2
	for st in "${STACKS[@]}"; do keys+=("$st/$3@SIZE@"); done
	for st in "${STACKS[@]:1}"; do ratios+=("${STACKS[0]}/$st"); done
	[ $TABLE_REF = 0 ] && k=-
	table "$1" "$5" "$k" "$4" "${keys[@]}" -- size "${STACKS[@]}" -- "${ratios[@]}"
}

SLOWER=0
{
mtable "MPI latency (osu_latency-like), usec one way; lower is better" min "lat/" "$SIZES" mpi-lat
mtable "MPI bandwidth (osu_bw-like, window 64), MB/s; higher is better" max "bw/" "$SIZES" mpi-bw
mtable "MPI bidirectional bandwidth (osu_bibw-like), MB/s; higher is better" max "bibw/" "$SIZES" mpi-bibw
mtable "MPI message rate (the bw stream), messages/s; higher is better" max "rate/" "$SIZES" mpi-rate
for np in $NPS; do
	for op in allreduce alltoall bcast exchange; do
		mtable "MPI $op, $np ranks, usec per operation; lower is better" min "$op/np$np/" \
			"$COLL_SIZES" "mpi-$op-np$np"
	done
done
for np in $OVERSUB; do
	for op in allreduce exchange; do
		mtable "MPI $op, $np ranks on $(nproc) cores (oversubscribed), usec per operation; lower is better" \
			min "$op/np$np/" 65536 "mpi-$op-np$np"
	done
done
mtable "MPI job start, 2 ranks (mpirun to exit; the slowest rank's MPI_Init), seconds; lower is better" \
	min "start/" "mpirun MPI_Init" mpi-start
libfabric_note
} | tee "$OUT/bench-mpi.txt"
# The tee ran in a subshell: count the flags again from the saved tables.
SLOWER=$(grep -c '< slower than vader' "$OUT/bench-mpi.txt")

bench_plot mpi-lat "MPI latency" usec "${STACKS[@]}"
bench_plot mpi-bw "MPI bandwidth" MB/s "${STACKS[@]}"
bench_plot mpi-bibw "MPI bidirectional bandwidth" MB/s "${STACKS[@]}"
bench_plot mpi-rate "MPI message rate" messages/s "${STACKS[@]}"
for np in $NPS; do
	for op in allreduce alltoall bcast exchange; do
		bench_plot "mpi-$op-np$np" "MPI $op, $np ranks" usec "${STACKS[@]}"
	done
done

bench_footer "failures:"
echo "$SLOWER rows where ${STACKS[0]} is slower than vader (marked <)"
echo "tables: $OUT/bench-mpi.txt"
bench_plots_done
echo "elapsed $((SECONDS - START))s"
