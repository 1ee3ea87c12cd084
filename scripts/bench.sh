#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# bench.sh - opx against libfabric's own shm, tcp and udp providers, same
# host, same run; then (scripts/bench-mpi.sh) opx under Open MPI against
# Open MPI's vader and libfabric shm at every size from 1 B to 4 MiB, and
# small collectives.
#
# Latency: fi_pingpong (libfabric-bin) RDM tagged, 8 B .. 16 KiB.
# Rate:    test/bench/opx_msgrate (windowed tagged sends + ack per window).
# Server and client are pinned to different cores (taskset -c 0 / -c 1) so
# the figures measure the transport, not the scheduler.  Every run has a
# timeout and the whole script a deadline (~3 minutes), so a hung provider
# shows up as "fail"/"skip" in the table instead of a stuck job.
#
# Usage: scripts/bench.sh            (or "make bench" in a build directory)
# Environment:
#   OPX_BUILD_DIR     build directory (default: the current directory if it
#                     holds a build, else <repo>/build)
#   FI_PROVIDER_PATH  where libopx-fi.so is (default $OPX_BUILD_DIR/.libs)
#   BENCH_PROVS       providers to compare (default "opx shm tcp udp"; the
#                     first is the numerator of every ratio)
#   BENCH_ITERS       fi_pingpong iterations per size (default 10000)
#   BENCH_SIZES       latency sizes (default 8 B .. 16 KiB, powers of two)
#   BENCH_RATE_SIZES  message-rate sizes (default "8 64")
#   BENCH_RATE_ITERS  opx_msgrate windows (default 2000)
#   BENCH_REPEAT      runs per figure; the best is reported (default 3)
#   BENCH_DEADLINE    seconds for the libfabric part (default 300)
#   BENCH_MPI=0       skip the Open MPI part (scripts/bench-mpi.sh)
#   BENCH_LARGE=1     afterwards, run scripts/bench-large.sh too (16 KiB ..
#                     16 MiB bandwidth and latency, also under Open MPI;
#                     about 4.5 more minutes)
set -u

BENCH_NAME=bench.sh
: "${BENCH_PROVS:=opx shm tcp udp}"
# shellcheck source=scripts/bench-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"

ITERS=${BENCH_ITERS:-10000}
SIZES=${BENCH_SIZES:-"8 16 32 64 128 256 512 1024 2048 4096 8192 16384"}
RATE_SIZES=${BENCH_RATE_SIZES:-"8 64"}
RATE_ITERS=${BENCH_RATE_ITERS:-2000}
DEADLINE=$((SECONDS + ${BENCH_DEADLINE:-300}))
RUN_TMO=15
PORT=$((20000 + RANDOM % 30000))
MSGRATE=$OPX_BUILD_DIR/test/bench/opx_msgrate

if ! command -v fi_pingpong >/dev/null 2>&1; then
	echo "bench.sh: fi_pingpong not found (Debian package libfabric-bin)" >&2
	exit 1
fi

# latency PROV SIZE -> best usec/xfer reported by the fi_pingpong client.
# Both sides' result lines of every run are kept in $BENCH_OUT/
# fi_pingpong-raw.txt.  Client and server time the same exchanges, so
# a run whose two figures differ by more than a quarter is not counted
# (and is marked there): a best-of-N must not be an artefact (in two
# full runs opx at 256 B read 0.14-0.15 us, below its 8 B figure; no
# raw lines were kept then).
latency() {
	local prov=$1 size=$2 out=$tmp/lat.$1.$2 r v vs best=
	local pp=(fi_pingpong -p "$prov" -e rdm -m tagged -S "$size" -I "$ITERS")
	for ((r = 0; r < REPEAT; r++)); do
		[ $SECONDS -ge $DEADLINE ] && break
		bench_pair "$out" $RUN_TMO "${pp[@]}" -B @PORT@ -- "${pp[@]}" -P @PORT@ 127.0.0.1 || {
			echo fail
			return
		}
		# columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
		v=$(awk '$1 != "bytes" && NF >= 8 { v = $7 } END { print v }' "$out")
		vs=$(awk '$1 != "bytes" && NF >= 8 { v = $7 } END { print v }' "$out.srv")
		[ -z "$v" ] && { echo fail; return; }
		if awk -v a="$v" -v b="$vs" 'BEGIN { exit !(b == "" || a > 1.25 * b || b > 1.25 * a) }'; then
			echo "$prov $size run $r client $v server ${vs:-none}: disagree, not counted" \
				>>"$BENCH_OUT/fi_pingpong-raw.txt"
			continue
		fi
		echo "$prov $size run $r client $v server $vs" >>"$BENCH_OUT/fi_pingpong-raw.txt"
		best=$(awk -v a="$v" -v b="$best" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }')
	done
	echo "${best:-skip}"
}

# rate PROV SIZE -> best messages per second from opx_msgrate.
rate() {
	local prov=$1 size=$2 out=$tmp/rate.$1.$2 r v best=
	if [ ! -x "$MSGRATE" ]; then
		echo n/a
		return
	fi
	for ((r = 0; r < REPEAT; r++)); do
		[ $SECONDS -ge $DEADLINE ] && break
		bench_pair "$out" $RUN_TMO "$MSGRATE" -p "$prov" -P @PORT@ -T $RUN_TMO -- \
			"$MSGRATE" -p "$prov" -P @PORT@ -T $RUN_TMO -S "$size" -n "$RATE_ITERS" \
			127.0.0.1 || {
			echo fail
			return
		}
		v=$(sed -n 's/.*msgs_per_sec=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
		[ -z "$v" ] && { echo fail; return; }
		best=$(awk -v a="$v" -v b="$best" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }')
	done
	echo "${best:-skip}"
}

p0=${PROVS[0]}

# header: "size <prov>... <p0>/<prov>..."
TABLE_W=(8 12 10)
header() {
	local p ratios=()
	for p in "${PROVS[@]:1}"; do ratios+=("$p0/$p"); done
	table_head size "${PROVS[@]}" -- "${ratios[@]}"
}

# row SIZE FUNCTION: one figure per provider, then the ratios (and a row
# of $BENCH_OUT/fabric-FUNCTION.dat for the plot).
row() {
	local size=$1 fn=$2 p vals=()
	for p in "${PROVS[@]}"; do vals+=("$($fn "$p" "$size")"); done
	table_row "fabric-$fn" - "$size" "${vals[@]}"
}

echo "opx benchmark: $(uname -n), $(nproc) cores, $pinning, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?'), FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
echo
echo "latency: fi_pingpong -e rdm -m tagged -I $ITERS, usec/xfer reported by the client, best of $REPEAT"
echo "(a run whose client and server figures differ by over 25 % is not counted; all: $BENCH_OUT/fi_pingpong-raw.txt)"
: >"$BENCH_OUT/fabric-latency.dat"
: >"$BENCH_OUT/fi_pingpong-raw.txt"
: >"$BENCH_OUT/fabric-rate.dat"
header
for size in $SIZES; do
	echo "  [latency $size B, $(wc -w <<<"$SIZES") sizes]" >&2
	row "$size" latency
done

echo
echo "message rate: opx_msgrate window 64, $RATE_ITERS windows, messages/s, best of $REPEAT"
header
for size in $RATE_SIZES; do
	echo "  rate $size B" >&2
	row "$size" rate
done
echo
echo "(latency ratio < 1 means $p0 is faster; rate ratio > 1 means $p0 is faster)"
bench_plot fabric-latency "fi_pingpong latency" usec "${PROVS[@]}"
bench_plot fabric-rate "message rate (opx_msgrate)" "messages/s" "${PROVS[@]}"
bench_plots_done
echo "elapsed ${SECONDS}s"

if [ "${BENCH_MPI:-1}" != 0 ]; then
	echo
	OPX_BUILD_DIR=$OPX_BUILD_DIR bash "$(dirname "${BASH_SOURCE[0]}")/bench-mpi.sh"
fi

if [ "${BENCH_LARGE:-0}" = 1 ]; then
	echo
	OPX_BUILD_DIR=$OPX_BUILD_DIR bash "$(dirname "${BASH_SOURCE[0]}")/bench-large.sh"
fi
