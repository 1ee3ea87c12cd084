# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing script
# SPDX-License-Identifier: BSD-2-Clause
# bench-common.sh - sourced by every bench-*.sh script: where the build
# is, which providers to compare, how server and client are pinned, a
# scratch directory removed on exit, and the helpers that fold repeated
# runs into one figure per cell.  Expects BENCH_NAME to be set.

# Default build directory: the current one when it holds a build (make
# bench), else <repo>/build as left by scripts/main-job.sh.
if [ -z "${OPX_BUILD_DIR:-}" ]; then
	if [ -e .libs/libopx-fi.so ]; then
		OPX_BUILD_DIR=$(pwd)
	else
		OPX_BUILD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build
	fi
fi
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$OPX_BUILD_DIR/.libs}
read -r -a PROVS <<<"${BENCH_PROVS:-opx shm}"
# Best of N: on a shared machine the noise is one-sided (interference only
# ever makes a run slower), so the best run is the most faithful figure.
REPEAT=${BENCH_REPEAT:-3}

if [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
	echo "$BENCH_NAME: warning: no libopx-fi.so in FI_PROVIDER_PATH=$FI_PROVIDER_PATH" >&2
fi

# Two distinct cores if we have them; otherwise run unpinned and say so.
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
	PIN_SRV=(taskset -c 0)
	PIN_CLI=(taskset -c 1)
	pinning="server on core 0, client on core 1"
else
	PIN_SRV=()
	PIN_CLI=()
	pinning="unpinned (fewer than 2 cores or no taskset)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/opx-$BENCH_NAME.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# wait_listen PORT PID: until a server (PID) listens on PORT, at most 60 s.
wait_listen() {
	local port=$1 pid=$2 i
	if ! command -v ss >/dev/null 2>&1; then
		sleep 1
		return 0
	fi
	for ((i = 0; i < 1200; i++)); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# Tables and plots go to BENCH_OUT (default <build>/bench-results).
BENCH_OUT=${BENCH_OUT:-$OPX_BUILD_DIR/bench-results}
mkdir -p "$BENCH_OUT" 2>/dev/null || BENCH_OUT=$tmp
PLOTS=()

# bench_plot NAME TITLE YLABEL LABEL...: a log-log PNG of $BENCH_OUT/NAME.dat
# (first column the size, then one column per LABEL; "NaN" where there is
# no figure), one line per LABEL.  Without gnuplot nothing happens; the
# caller says so once (bench_plots_done).
bench_plot() {
	local name=$1 title=$2 ylabel=$3 i cmd=""
	shift 3
	command -v gnuplot >/dev/null 2>&1 || return 0
	i=2
	for label in "$@"; do
		cmd="$cmd${cmd:+, }'$BENCH_OUT/$name.dat' using 1:$i with linespoints title '$label'"
		i=$((i + 1))
	done
	gnuplot -e "set terminal png size 900,600; set output '$BENCH_OUT/$name.png';
		set logscale xy 2; set title '$title'; set xlabel 'message size (bytes)';
		set ylabel '$ylabel'; set key left top; set grid; plot $cmd" 2>/dev/null &&
		PLOTS+=("$BENCH_OUT/$name.png")
}

# bench_dat NAME SIZE VALUE...: append one row ("fail"/"skip" become NaN).
bench_dat() {
	local name=$1 v row
	shift
	row=$1
	shift
	for v in "$@"; do
		[[ $v =~ ^[0-9.]+$ ]] || v=NaN
		row="$row $v"
	done
	echo "$row" >>"$BENCH_OUT/$name.dat"
}

bench_plots_done() {
	if [ ${#PLOTS[@]} -gt 0 ]; then
		echo "plots: ${PLOTS[*]}"
	elif ! command -v gnuplot >/dev/null 2>&1; then
		echo "plots: skipped (gnuplot not installed: apt-get install gnuplot-nox)"
	fi
}

# why FILE...: the last non-empty line of the given logs, for the failure list.
why() {
	cat "$@" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c 1-120
}

# better KIND A B: the better of two figures (A may be empty); KIND is min
# (lower is better: latencies) or max.
better() {
	awk -v m="$1" -v a="$2" -v b="$3" 'BEGIN {
		if (a == "") { print b; exit }
		if (m == "min") print (b + 0 < a + 0) ? b : a;
		else print (b + 0 > a + 0) ? b : a }'
}

# kind MODE: how figures of MODE compare: min for latencies (lat, put_lat...),
# max for everything else.
kind() {
	case $1 in *_lat | lat) echo min ;; *) echo max ;; esac
}

# keep KEY KIND VALUE: fold VALUE into VAL[KEY] (an associative array of
# the sourcing script) unless the cell failed; "skip" counts as empty.
keep() {
	local old=${VAL[$1]:-}
	[ "$old" = fail ] && return
	[ "$old" = skip ] && old=
	VAL[$1]=$(better "$2" "$old" "$3")
}

# ratio A B: A/B with two decimals, or "-" when either is not a number.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b;
		else printf "-" }'
}
