#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-rma.sh - one-sided operations: opx against libfabric's own shm
# provider, and opx under Open MPI's osc rdma against Open MPI's osc sm,
# in one run on this host.
#
#   libfabric: test/bench/opx_rma, server = passive target, for 8 B .. 16 MiB
#              put_lat / get_lat  fi_write / fi_read, wait, next (usec)
#              put_bw / get_bw    windows of 64, then wait for all (MB/s)
#              fadd               fi_fetch_atomic FI_SUM FI_UINT64 at 8 B,
#                                 windows of 64 (operations/s)
#              puts once at the provider's default completion level and
#              once with FI_DELIVERY_COMPLETE (-D): a provider may complete
#              a put before the data is at the target, opx never does.
#   MPI:       test/bench/mpi_put.c (built here with mpicc), 2 ranks,
#              osu_put_latency / osu_get_latency / osu_acc_latency-style
#              (MPI_Accumulate MPI_SUM of ints) at 8 B .. 1 MiB:
#              lock once + op + MPI_Win_flush per iteration ("flush"), and
#              lock + op + unlock per iteration ("lock"):
#                opx     osc rdma over btl ofi on opx, MPI_Win_create
#                vader   pml ob1 + btl vader with Open MPI's default
#                        one-sided component, MPI_Win_create (osu's default
#                        window, the same as opx's column)
#                osc sm  pml ob1 + btl vader + osc sm, MPI_Win_allocate
#                        (the only flavour osc sm takes)
#              plus, for reference, osc rdma with MPI_Win_allocate: on one
#              node it maps the window and copies with memcpy, so that
#              column shows osc rdma's own shared-memory path, not opx.
#
# libfabric server and client are pinned to different cores (taskset -c 0 /
# -c 1).  Each figure is the best of BENCH_REPEAT runs (interference only
# slows a run down).  Every run has a timeout and the script a deadline;
# a run that fails, times out or reads back wrong data marks the point it
# was at "fail" (the reason is listed under the tables), points it never
# reached and that no other run measured say "skip".  Nothing is retried
# to make a failure go away, except a run that could not start (port in
# use, shm's stale region of a reused pid), which is rerun once and noted.
#
# Usage: scripts/bench-rma.sh   (or "make bench-rma" in a build directory)
# Environment:
#   OPX_BUILD_DIR        build directory (default: the current directory if
#                        it holds a build, else <repo>/build)
#   FI_PROVIDER_PATH     where libopx-fi.so is (default $OPX_BUILD_DIR/.libs)
#   BENCH_PROVS          providers to compare (default "opx shm"; the first
#                        is the numerator of every ratio)
#   BENCH_RMA_MAX        largest libfabric size in bytes (default 16777216)
#   BENCH_RMA_TARGET     seconds per measured point (default 0.1)
#   BENCH_RMA_DC=0       skip the FI_DELIVERY_COMPLETE put pass
#   BENCH_RMA_MPI=0      skip the Open MPI part
#   BENCH_RMA_MPI_SIZES  MPI sizes (default 1 B .. 4 MiB: 1, 8, 64, 128 and 256 B
#                        either side of osc rdma's per-element atomics, then x4)
#   BENCH_REPEAT         runs per figure, best reported (default 3)
#   BENCH_RMA_DEADLINE   seconds for the whole script (default 480)
#   BENCH_OUT            where the tables (bench-rma.txt) and plots go
set -u

BENCH_NAME=bench-rma.sh
# shellcheck source=scripts/bench-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"

MAX=${BENCH_RMA_MAX:-16777216}
TARGET=${BENCH_RMA_TARGET:-0.1}
MPI_SIZES=${BENCH_RMA_MPI_SIZES:-"1 8 64 128 256 1024 4096 16384 65536 262144 1048576 4194304"}
START=$SECONDS
DEADLINE=$((START + ${BENCH_RMA_DEADLINE:-480}))
# The libfabric part stops early enough to leave the MPI part its time.
MPI_RESERVE=$((60 * REPEAT))
[ "${BENCH_RMA_MPI:-1}" = 0 ] && MPI_RESERVE=0
RUN_TMO=60
MPI_TMO=90
PORT=$((20000 + RANDOM % 30000))
RMA=$OPX_BUILD_DIR/test/bench/opx_rma
OUTFILE=$BENCH_OUT/bench-rma.txt

p0=${PROVS[0]}
p1=${PROVS[1]:-shm}

if [ ! -x "$RMA" ]; then
	echo "bench-rma.sh: $RMA not built (run make in $OPX_BUILD_DIR)" >&2
	exit 1
fi

# The sizes opx_rma measures up to MAX (its own table, see opx_rma.c).
SIZES=""
for s in 8 64 512 4096 16384 65536 262144 1048576 4194304 16777216; do
	[ "$s" -le "$MAX" ] && SIZES="$SIZES $s"
done
SIZES=${SIZES# }
if [ -z "$SIZES" ]; then
	echo "bench-rma.sh: BENCH_RMA_MAX=$MAX is below the smallest size (8)" >&2
	exit 1
fi

# "<prov>/<pass>/<op>/<size>" and "mpi/<label>/<op>/<sync>/<size>" -> best
# figure, fail or skip
declare -A VAL

# ---- libfabric: opx_rma ---------------------------------------------------

# The points of one pass in the order opx_rma measures them.
pass_points() {
	local pass=$1 size op
	for size in $SIZES; do
		if [ "$pass" = dc ]; then
			for op in put_lat put_bw; do echo "$op/$size"; done
		else
			for op in put_lat get_lat put_bw get_bw; do echo "$op/$size"; done
		fi
	done
	[ "$pass" = dc ] || echo "fadd/8"
}

# rma_run PROV PASS RUN: one opx_rma sweep (pass "def": every op at the
# provider's default completion; "dc": puts with FI_DELIVERY_COMPLETE);
# folds its lines into VAL and records a failure against the point the run
# was at.
rma_run() {
	local prov=$1 pass=$2 run=$3 out=$tmp/rma.$1.$2.$3 crc src pt op size v line
	local extra=() PAIR_WHAT="$1 $2 run $3"
	local args=(-p "$prov" -P @PORT@ -T $((RUN_TMO - 5)))
	# shellcheck disable=SC2054 # one option value, commas and all
	[ "$pass" = dc ] && extra=(-D -o put_lat,put_bw)
	bench_pair "$out" $RUN_TMO env "FI_PROVIDER=$prov" "$RMA" "${args[@]}" -- \
		env "FI_PROVIDER=$prov" "$RMA" "${args[@]}" -m "$MAX" -t "$TARGET" "${extra[@]}" 127.0.0.1
	crc=$CRC src=$SRC
	local failed=0
	for pt in $(pass_points "$pass"); do
		op=${pt%/*} size=${pt#*/}
		line=$(grep "^rma prov=$prov op=$op size=$size " "$out" | tail -n 1)
		if [ "$op" = fadd ]; then
			v=$(sed -n 's/.* ops_per_sec=\([0-9.]*\).*/\1/p' <<<"$line")
		elif [ "$(kind "$op")" = min ]; then
			v=$(sed -n 's/.* usec=\([0-9.]*\).*/\1/p' <<<"$line")
		else
			v=$(sed -n 's/.* MBps=\([0-9.]*\).*/\1/p' <<<"$line")
		fi
		if [ -n "$v" ]; then
			keep "$prov/$pass/$pt" "$(kind "$op")" "$v"
		elif [ $crc -ne 0 ] || [ $src -ne 0 ]; then
			# The first point the failed run did not print is where it died.
			VAL[$prov/$pass/$pt]=fail
			FAILURES+=("$prov $op $size$([ "$pass" = dc ] && echo ' (-D)'), run $run: client rc $crc, server rc $src: $(why "$out" "$out.srv")")
			failed=1
			break
		fi
	done
	if [ $failed = 0 ] && { [ $crc -ne 0 ] || [ $src -ne 0 ]; }; then
		FAILURES+=("$prov $pass run $run, after the last point: client rc $crc, server rc $src: $(why "$out" "$out.srv")")
	fi
}

echo "opx one-sided benchmark: $(uname -n), $(nproc) cores, $pinning"
echo "libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?'), FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs on this machine slow every figure)"
echo

PASSES="def"
[ "${BENCH_RMA_DC:-1}" != 0 ] && PASSES="def dc"
fab_deadline=$((DEADLINE - MPI_RESERVE))
# Providers interleaved run by run, so a slow spell of a shared machine
# does not land on one column only.
for ((r = 1; r <= REPEAT; r++)); do
	for pass in $PASSES; do
		for prov in "$p0" "$p1"; do
			[ $SECONDS -ge $fab_deadline ] && continue
			echo "  [libfabric run $r/$REPEAT] $prov $([ "$pass" = dc ] && echo 'puts FI_DELIVERY_COMPLETE' || echo 'all ops')" >&2
			rma_run "$prov" "$pass" "$r"
		done
	done
done

# fab_table PASS OP TITLE: size, p0, p1, p0/p1 and a flag where p0 is
# worse than p1.
TABLE_WORSE="$p0 worse than $p1"
TABLE_NOFIG="no $p0 figure"
fab_table() {
	local sizes=$SIZES
	[ "$2" = fadd ] && sizes=8
	table "$3" "rma-$1-$2" "$(kind "$2")" "$sizes" "$p0/$1/$2/@SIZE@" "$p1/$1/$2/@SIZE@" -- \
		size "$p0" "$p1" -- "$p0/$p1"
}

# ---- Open MPI: mpi_put --------------------------------------------------
MPI_OK=0
MPI_LABELS=(opx vader sm rdma-alloc)

# The bench-common.sh mpi_run hooks: one mpirun of mpi_put over every size,
# op and sync.  mpi_cmd LABEL: the options and mpi_put flags of a stack.
# shellcheck disable=SC2054 # commas belong to MCA values (self,ofi)
mpi_cmd() {
	local ofi=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include "$p0"
		-mca btl self,ofi -mca btl_ofi_provider_include "$p0"
		-mca osc rdma -mca osc_rdma_btls ofi
		-x "FI_PROVIDER=$p0" -x FI_PROVIDER_PATH) args
	case $1 in
	opx) args=("${ofi[@]}" "$MPI_PUT" -w create) ;;
	rdma-alloc) args=("${ofi[@]}" "$MPI_PUT" -w allocate) ;;
	vader) args=(-mca pml ob1 -mca btl self,vader "$MPI_PUT" -w create) ;;
	sm) args=(-mca pml ob1 -mca btl self,vader -mca osc sm "$MPI_PUT" -w allocate) ;;
	esac
	CMD=(mpirun -np 2 --oversubscribe --bind-to core "${MPI_ROOT[@]}" "${args[@]}" -l "$1"
		-o put,get,acc -t "$TARGET" -s "${MPI_SIZES// /,}")
}

mpi_points() {
	local size op sync
	for size in $MPI_SIZES; do
		for op in put get acc; do
			for sync in flush lock; do echo "$op/$sync/$size"; done
		done
	done
}

mpi_point() {
	local op sync size
	IFS=/ read -r op sync size <<<"$2"
	KEY=mpi/$1/$2 KIND=min WHAT="$op/$sync $size"
	V=$(mpi_fig "$3" "^mpi_rma label=$1 .* op=$op sync=$sync size=$size " usec)
}

if [ "${BENCH_RMA_MPI:-1}" != 0 ]; then
	MPI_PUT=$OPX_BUILD_DIR/test/bench/mpi_put
	if mpi_build mpi_put "$MPI_PUT"; then
		MPI_OK=1
		# Debian's openmpi-mca-params.conf has "mtl = ^ofi"; the command
		# line wins.  A run needs about 5 s; do not start one that cannot
		# finish.
		mpi_runs 10
	fi
fi

# mpi_table OP SYNC TITLE: opx, osc sm, their ratio (flagged above 1.5, the
# target), and the osc rdma + MPI_Win_allocate reference.
MPI_OVER=0
mpi_table() {
	local op=$1 sync=$2 title=$3 size a b c d flag rt rv
	echo "$title"
	printf '%9s %12s %12s %10s %12s %10s %12s\n' size "MPI $p0" "vader" "$p0/vader" "osc sm" \
		"$p0/sm" "rdma-alloc"
	: >"$BENCH_OUT/rma-mpi-$op-$sync.dat"
	for size in $MPI_SIZES; do
		a=${VAL[mpi/opx/$op/$sync/$size]:-skip}
		b=${VAL[mpi/sm/$op/$sync/$size]:-skip}
		c=${VAL[mpi/rdma-alloc/$op/$sync/$size]:-skip}
		d=${VAL[mpi/vader/$op/$sync/$size]:-skip}
		rt=$(ratio "$a" "$b")
		rv=$(ratio "$a" "$d")
		flag=""
		if [[ $a =~ ^[0-9.]+$ && $b =~ ^[0-9.]+$ ]]; then
			if awk -v r="$rt" 'BEGIN { exit !(r + 0 > 1.5) }'; then
				flag="  < over 1.5x osc sm"
				MPI_OVER=$((MPI_OVER + 1))
			fi
		elif [ "$a" = fail ] || [ "$a" = skip ]; then
			flag="  < no $p0 figure"
			MPI_OVER=$((MPI_OVER + 1))
		fi
		printf '%9s %12s %12s %10s %12s %10s %12s%s\n' "$size" "$a" "$d" "$rv" "$b" "$rt" "$c" \
			"$flag"
		bench_dat "rma-mpi-$op-$sync" "$size" "$a" "$b" "$c" "$d"
	done
	echo
}

{
	fab_table def put_lat "put latency: fi_write + wait, provider's default completion, usec; lower is better, best of $REPEAT"
	fab_table def get_lat "get latency: fi_read + wait, usec; lower is better, best of $REPEAT"
	if [[ " $PASSES " == *" dc "* ]]; then
		fab_table dc put_lat "put latency: fi_writemsg FI_DELIVERY_COMPLETE + wait, usec; lower is better, best of $REPEAT"
	fi
	fab_table def put_bw "put bandwidth: windows of 64 fi_write, provider's default completion, MB/s; higher is better, best of $REPEAT"
	fab_table def get_bw "get bandwidth: windows of 64 fi_read, MB/s; higher is better, best of $REPEAT"
	if [[ " $PASSES " == *" dc "* ]]; then
		fab_table dc put_bw "put bandwidth: windows of 64 fi_writemsg FI_DELIVERY_COMPLETE, MB/s; higher is better, best of $REPEAT"
	fi
	fab_table def fadd "8-byte fetch-add rate: windows of 64 fi_fetch_atomic FI_SUM FI_UINT64, operations/s; higher is better, best of $REPEAT"
	echo "$SLOWER libfabric rows where $p0 is worse than $p1 or has no figure (marked <)"
	echo

	if [ $MPI_OK = 1 ]; then
		echo "Open MPI $(mpirun --version 2>/dev/null | head -n 1 | awk '{print $NF}'), 2 ranks, best of $REPEAT mpirun:"
		echo "  MPI $p0     = pml cm + mtl ofi + osc rdma over btl ofi on $p0, MPI_Win_create (data through $p0)"
		echo "  vader      = pml ob1 + btl vader, Open MPI's default osc, MPI_Win_create (as MPI $p0)"
		echo "  osc sm     = pml ob1 + btl vader + osc sm, MPI_Win_allocate (load/store to a mapped window)"
		echo "  rdma-alloc = the MPI $p0 stack with MPI_Win_allocate: osc rdma maps the window on one"
		echo "               node and copies with memcpy, so $p0 is not involved (reference only)"
		echo
		mpi_table put flush "MPI_Put latency, lock once + put + MPI_Win_flush (osu_put_latency -s flush), usec; lower is better"
		mpi_table get flush "MPI_Get latency, lock once + get + MPI_Win_flush (osu_get_latency -s flush), usec; lower is better"
		mpi_table put lock "MPI_Put latency, lock + put + unlock per iteration (osu_put_latency -s lock), usec; lower is better"
		mpi_table get lock "MPI_Get latency, lock + get + unlock per iteration (osu_get_latency -s lock), usec; lower is better"
		mpi_table acc flush "MPI_Accumulate latency (MPI_SUM of size/4 ints), lock once + acc + MPI_Win_flush (osu_acc_latency -s flush), usec; lower is better"
		mpi_table acc lock "MPI_Accumulate latency, lock + acc + unlock per iteration (osu_acc_latency -s lock), usec; lower is better"
		echo "$MPI_OVER MPI rows where $p0 is over 1.5x osc sm or has no figure (marked <)"
		echo
	fi

	bench_footer "failures (a cell marked fail is the point that run was at):"
	echo "(latency: ratio < 1 means $p0 is faster; bandwidth and rate: ratio > 1 means $p0 is faster)"
} | tee "$OUTFILE"
echo "tables: $OUTFILE"
# Plots here: the tables above ran in a subshell (the pipe into tee).
for f in def-put_lat def-get_lat dc-put_lat; do
	[ -s "$BENCH_OUT/rma-$f.dat" ] && bench_plot "rma-$f" "libfabric ${f#*-} (${f%%-*})" usec "$p0" "$p1"
done
for f in def-put_bw def-get_bw dc-put_bw; do
	[ -s "$BENCH_OUT/rma-$f.dat" ] && bench_plot "rma-$f" "libfabric ${f#*-} (${f%%-*})" MB/s "$p0" "$p1"
done
if [ $MPI_OK = 1 ]; then
	for f in put-flush get-flush put-lock get-lock acc-flush acc-lock; do
		bench_plot "rma-mpi-$f" "MPI ${f%-*} latency, ${f#*-}" usec "MPI $p0" "osc sm" "osc rdma allocate" \
			"vader create"
	done
fi
bench_plots_done
echo "elapsed $((SECONDS - START))s"
