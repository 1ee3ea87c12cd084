# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing script
# SPDX-License-Identifier: BSD-2-Clause
# bench-common.sh - sourced by every bench-*.sh script: where the build
# is, which providers to compare, how server and client are pinned, a
# scratch directory removed on exit, and the helpers that fold repeated
# runs into one figure per cell, and what the scripts share: the
# server/client launcher (bench_pair), the comparison tables (table), the
# failures and notes under them (bench_footer) and the Open MPI runs
# (mpi_build, mpi_run, mpi_runs).  Expects BENCH_NAME to be set.

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

FAILURES=() # one line per failed run, printed by bench_footer
NOTES=()    # what the reader should know that is no failure (reruns...)

# ---- server/client launcher -------------------------------------------------
# PAIR_SRV / PAIR_CLI: words put between the pinning and the command of
# every server / client (bench-hosts.sh: "bash hosts.sh run NS"); PAIR_NS:
# the network namespace the server listens in (none: this one); PAIR_WAIT_S:
# how long a server may take to listen before its client starts anyway.
PAIR_SRV=()
PAIR_CLI=()
PAIR_NS=
PAIR_WAIT_S=60
CRC=0 SRC=0 # statuses of the last bench_pair

# wait_listen PORT PID: until something listens on (TCP) or is bound to
# (UDP) PORT, in PAIR_NS if set.  0: it is; 1: the server (PID) died; 2:
# not seen within PAIR_WAIT_S seconds, the server still running.
wait_listen() {
	local port=$1 pid=$2 i ss=(ss)
	[ -n "$PAIR_NS" ] && ss=(ip netns exec "$PAIR_NS" ss)
	if ! command -v ss >/dev/null 2>&1; then
		sleep 1
		return 0
	fi
	for ((i = 0; i < PAIR_WAIT_S * 20; i++)); do
		"${ss[@]}" -Hlntu "sport = :$port" 2>/dev/null | grep -q . && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 2
}

# bench_pair OUT TMO SERVER_CMD... -- CLIENT_CMD...: the server (pinned by
# PIN_SRV), then, once it listens, the client (PIN_CLI), each under TMO
# seconds, on $PORT: the literal word @PORT@ in either command becomes it,
# and every run moves it on by one.  The client's output goes to OUT, the
# server's to OUT.srv; CRC and SRC hold their statuses, and the return is 0
# when both are 0.  A server that outlives its client by 5 s is stopped.
# A run that could not start - its port taken, or libfabric 1.17 shm's
# region named after a pid that a killed process left in /dev/shm
# (fi_enable EBUSY) - is rerun (three tries in all) and NOTES says so,
# naming the run PAIR_WHAT (default: OUT's file name).
bench_pair() {
	local out=$1 tmo=$2 srv=() cli=() a seen=0 spid i wl try what
	shift 2
	what=${PAIR_WHAT:-$(basename "$out")}
	for a in "$@"; do
		if [ "$a" = "--" ]; then
			seen=1
		elif [ $seen -eq 0 ]; then
			srv+=("$a")
		else
			cli+=("$a")
		fi
	done
	for ((try = 0; try < 3; try++)); do
		timeout -k 5 "$tmo" "${PIN_SRV[@]}" "${PAIR_SRV[@]}" "${srv[@]//@PORT@/$PORT}" \
			>"$out.srv" 2>&1 &
		spid=$!
		wait_listen "$PORT" "$spid"
		wl=$?
		if [ $wl -ne 1 ]; then
			[ $wl -eq 2 ] && NOTES+=("$what: server not seen on port $PORT within $PAIR_WAIT_S s; client started anyway")
			timeout -k 5 "$tmo" "${PIN_CLI[@]}" "${PAIR_CLI[@]}" "${cli[@]//@PORT@/$PORT}" \
				>"$out" 2>&1
			CRC=$?
		else
			CRC=1
			: >"$out"
		fi
		for ((i = 0; i < 100; i++)); do
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.05
		done
		kill "$spid" 2>/dev/null
		wait "$spid"
		SRC=$?
		PORT=$((PORT + 1))
		[ $PORT -gt 49999 ] && PORT=20000
		[ "$CRC" -eq 0 ] && [ "$SRC" -eq 0 ] && return 0
		if grep -qi 'address already in use' "$out.srv" "$out"; then
			NOTES+=("$what: port in use, rerun on the next port")
		elif grep -q 'fi_enable: Device or resource busy' "$out" "$out.srv"; then
			NOTES+=("$what: EBUSY (stale shm region of a reused pid), rerun")
		else
			return 1
		fi
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

# worse KIND A B: true when A is worse than B: above it for KIND min (a
# latency), below it for KIND max; false when either is not a number.
worse() {
	awk -v a="$2" -v b="$3" -v m="$1" 'BEGIN {
		exit !(a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ &&
		       (m == "min" ? a + 0 > b + 0 : a + 0 < b + 0)) }'
}

# ---- comparison tables --------------------------------------------------------
# A row is a size, one figure per column, then the first figure's ratio to
# each other one.  TABLE_W: the widths of the size, figure and ratio
# columns.  A row of KIND min or max (not "-") whose first figure is worse
# than the one in column TABLE_REF (0-based, default 1) ends in
# "  < TABLE_WORSE", one with no first figure in "  < TABLE_NOFIG" (when
# set); each flag counts in SLOWER.
TABLE_W=(9 12 10)
TABLE_REF=1
TABLE_WORSE="worse"
TABLE_NOFIG=
SLOWER=0

# table_head HEAD... -- RATIO-HEAD...: the heading line (HEAD: the size
# column, then one per figure).
table_head() {
	local h line seen=0
	line=$(printf "%${TABLE_W[0]}s" "$1")
	shift
	for h in "$@"; do
		if [ "$h" = -- ]; then
			seen=1
		elif [ $seen = 0 ]; then
			line+=$(printf " %${TABLE_W[1]}s" "$h")
		else
			line+=$(printf " %${TABLE_W[2]}s" "$h")
		fi
	done
	echo "$line"
}

# table_row DAT KIND SIZE FIGURE...: one row (see above), and the same
# figures as a row of $BENCH_OUT/DAT.dat for the plot.
table_row() {
	local dat=$1 k=$2 size=$3 v i line flag=""
	shift 3
	local vals=("$@")
	line=$(printf "%${TABLE_W[0]}s" "$size")
	for v in "${vals[@]}"; do line+=$(printf " %${TABLE_W[1]}s" "$v"); done
	for ((i = 1; i < ${#vals[@]}; i++)); do
		line+=$(printf " %${TABLE_W[2]}s" "$(ratio "${vals[0]}" "${vals[$i]}")")
	done
	if [ "$k" != - ]; then
		if worse "$k" "${vals[0]}" "${vals[$TABLE_REF]:-}"; then
			flag="  < $TABLE_WORSE"
		elif [ -n "$TABLE_NOFIG" ] && { [ "${vals[0]}" = fail ] || [ "${vals[0]}" = skip ]; }; then
			flag="  < $TABLE_NOFIG"
		fi
		[ -n "$flag" ] && SLOWER=$((SLOWER + 1))
	fi
	echo "$line$flag"
	bench_dat "$dat" "$size" "${vals[@]}"
}

# table TITLE DAT KIND SIZES KEY... -- HEAD... -- RATIO-HEAD...: a whole
# table of the figures VAL[KEY] (the word @SIZE@ in a KEY is the row's
# size; a missing figure says "skip"), then an empty line.  DAT.dat starts
# afresh with a "# size HEAD..." line.
table() {
	local title=$1 dat=$2 k=$3 sizes=$4 keys=() heads=() size key vals
	shift 4
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		keys+=("$1")
		shift
	done
	shift
	heads=("$@")
	echo "$title"
	table_head "${heads[@]}"
	vals=("${heads[@]:0:$((${#keys[@]} + 1))}")
	echo "# ${vals[*]}" >"$BENCH_OUT/$dat.dat"
	for size in $sizes; do
		vals=()
		for key in "${keys[@]}"; do vals+=("${VAL[${key//@SIZE@/$size}]:-skip}"); done
		table_row "$dat" "$k" "$size" "${vals[@]}"
	done
	echo
}

# bench_footer HEADING: the failures (each once) under HEADING, then the
# notes, each list followed by an empty line; nothing for an empty list.
bench_footer() {
	if [ ${#FAILURES[@]} -gt 0 ]; then
		echo "$1"
		printf '  %s\n' "${FAILURES[@]}" | awk '!seen[$0]++'
		echo
	fi
	if [ ${#NOTES[@]} -gt 0 ]; then
		echo "notes:"
		printf '  %s\n' "${NOTES[@]}"
		echo
	fi
}

# ---- Open MPI -----------------------------------------------------------------
MPI_ROOT=()
[ "$(id -u)" = 0 ] && MPI_ROOT=(--allow-run-as-root)

# mpi_build NAME DEST: test/bench/NAME.c built with mpicc as DEST; when it
# cannot be, NOTES (no Open MPI) or FAILURES (it does not compile) says
# why and the return is non-zero.
mpi_build() {
	local src
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/test/bench/$1.c
	if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
		NOTES+=("Open MPI: mpicc/mpirun not found (openmpi-bin libopenmpi-dev), MPI part skipped")
		return 1
	fi
	if ! mkdir -p "$(dirname "$2")" ||
		! mpicc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$2" "$src" >"$tmp/mpicc" 2>&1; then
		FAILURES+=("Open MPI: cannot build $1: $(why "$tmp/mpicc")")
		return 1
	fi
}

# mpi_why FILE: what an mpirun log says went wrong (the program's own
# message or the signal), else its last line.
mpi_why() {
	local w
	w=$(grep -vE '^mpi(_rma)? ' "$1" | grep -E 'mpi_[a-z]+:|Segmentation|signal [0-9]|Aborted|timeout|rror' |
		head -n 2 | tr '\n' ' ' | cut -c 1-160)
	echo "${w:-$(why "$1")}"
}

# mpi_fig FILE PATTERN FIELD: the figure FIELD=... of the last line of FILE
# that matches PATTERN (empty when there is none).
mpi_fig() {
	grep "$2" "$1" | tail -n 1 | sed -n "s/.* $3=\([0-9.]*\).*/\1/p"
}

# mpi_run LABEL RUN: one mpirun, under MPI_TMO seconds, of the command the
# sourcing script's mpi_cmd LABEL puts in CMD (mpirun and its arguments;
# "-T MPI_TMO-10" is added).  Its output goes to $tmp/mpi.LABEL.RUN, and
# every point that mpi_points prints is folded into VAL: mpi_point LABEL
# POINT FILE sets KEY, KIND (min or max), V (the figure, empty if none) and
# WHAT (the point in words).  When the mpirun failed, the first point with
# no figure is marked fail and FAILURES says why.  mpi_after, if defined,
# runs last.
mpi_run() {
	local label=$1 run=$2 out=$tmp/mpi.$1.$2 rc pt failed=0
	mpi_cmd "$label"
	timeout -k 5 "$MPI_TMO" "${CMD[@]}" -T $((MPI_TMO - 10)) >"$out" 2>&1
	rc=$?
	for pt in $(mpi_points); do
		mpi_point "$label" "$pt" "$out"
		if [ -n "$V" ]; then
			keep "$KEY" "$KIND" "$V"
		elif [ $rc -ne 0 ]; then
			# shellcheck disable=SC2004 # VAL: the sourcing script's associative array
			VAL[$KEY]=fail
			FAILURES+=("MPI $label $WHAT, run $run: mpirun rc $rc: $(mpi_why "$out")")
			failed=1
			break
		fi
	done
	if [ $failed = 0 ] && [ $rc -ne 0 ]; then
		FAILURES+=("MPI $label run $run, after the last point: mpirun rc $rc: $(mpi_why "$out")")
	fi
	# A hook of the sourcing script, if it has one (bench-hosts.sh: end
	# what a killed mpirun left behind).
	if declare -F mpi_after >/dev/null; then mpi_after; fi
	return 0
}

# mpi_runs SECS: BENCH_REPEAT rounds of mpi_run over MPI_LABELS, labels
# interleaved; no run starts within SECS seconds of DEADLINE.
mpi_runs() {
	local r label
	for ((r = 1; r <= REPEAT; r++)); do
		for label in "${MPI_LABELS[@]}"; do
			[ $((SECONDS + $1)) -ge "$DEADLINE" ] && continue
			echo "  [MPI run $r/$REPEAT] $label" >&2
			mpi_run "$label" "$r"
		done
	done
}
