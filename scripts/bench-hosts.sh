#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# bench-hosts.sh - opx between two hosts, against libfabric's own tcp
# (tcp;ofi_rxm) and udp (udp;ofi_rxd) and against the machine's raw UDP
# floor, in one run; the same under 1 % UDP loss; and Open MPI on opx
# against Open MPI's own TCP path.  The hosts are two network namespaces
# made by scripts/hosts.sh (prefix opxb: opxb1 = 198.18.0.1 runs every
# server, opxb2 = 198.18.0.2 every client, joined by a bridge at MTU
# $HOSTS_MTU, 9000 unless set), so root is needed; where namespaces cannot
# be made the script prints SKIP and the reason and exits 0.
#
#   raw UDP    test/bench/udp_floor: 8-byte datagram echo, both sides busy
#              polling recv(MSG_DONTWAIT); one-way = half the median round
#              trip (the mean is printed too).  The floor any transport
#              over UDP can approach on this machine.  Its client connects
#              its socket; a second run with one that does not (-u) is
#              printed for reference (one socket for many peers cannot).
#   latency    fi_pingpong -e rdm -m tagged -S 8 -I 20000 (libfabric-bin),
#              usec/xfer of the client: the mean one-way time
#   rate       test/bench/opx_msgrate -S 8 (windows of 64 tagged sends,
#              one ack per window), messages/s
#   bandwidth  test/bench/opx_bw -m bw at 64 KiB, 1 MiB, 16 MiB (windows of
#              64 sends, one ack per window), MB/s.  udp;ofi_rxd moves a few
#              tens of MB/s here: its 16 MiB run (three windows of 1 GiB at
#              least) does not fit the time limit and says fail.
#   loss       latency, rate and bandwidth again for opx and tcp with
#              "hosts.sh drop HOST 1" on both hosts: nftables drops 1 % of
#              the UDP datagrams arriving in each namespace.  Only UDP:
#              tcp's segments are not dropped, so its column there is a
#              reference taken in the same minute, not tcp under loss.
#              Fewer latency iterations (2000) than without loss.
#   auth       latency, rate and bandwidth of opx with FI_OPX_AUTH=off,
#              header (the default, also the opx column above) and full,
#              and header with FI_OPX_UDP_CRC=1, interleaved in one pass:
#              what the udp wire's MAC and the payload CRC cost.
#   MTU 1500   at the end the hosts again with every link at MTU 1500:
#              opx_bw of opx and tcp, loss-free and with 1 % and 5 % of
#              every IP packet (TCP's too) dropped on arrival in both.
#   many hosts 8 hosts x 2 ranks: Open MPI alltoall and allreduce
#              (test/bench/mpi_collbench.c), 8 B .. 1 MiB, opx against ob1
#              tcp (vader within a host), loss-free and at 1 % loss of every
#              IP packet; usec per operation, results checked.
#   MPI        test/bench/mpi_bw.c (built here with mpicc), 1 rank per
#              host (--map-by node): pml cm + mtl ofi on opx against pml
#              ob1 + btl tcp,self; latency (half round trip) and bandwidth
#              (osu_bw-like) at 8 B, 64 KiB, 1 MiB.
#
# Servers run on core 0 and clients on core 1 (taskset; MPI rank r on core
# r), so the two "hosts" do not share a core.  Each figure is the best of
# BENCH_REPEAT runs, providers interleaved run by run (on a shared machine
# interference only ever makes a run slower).  Every run has a timeout and
# the script a deadline; a run that fails or times out marks its cell
# "fail" (the reason is listed under the tables), one the deadline cut off
# "skip".  Only a run that could not start (port in use) is rerun, on the
# next port.  The targets of issue 7 are printed as met / not met; they do
# not change the exit status.  The hosts are taken down on exit, whatever
# happens.  Another prefix of hosts.sh up (its hosts claim 198.18.0.0/24
# too) makes the script say so and exit 1.
#
# Usage: scripts/bench-hosts.sh   (or "make bench-hosts" in a build directory)
#        BENCH_QUICK=1 took 2 minutes on a 2-core VM.
#        The MTU 1500 and many-hosts sections are in bench-hosts-more.sh,
#        which this script sources.
# Environment:
#   OPX_BUILD_DIR          build directory (default: the current directory if
#                          it holds a build, else <repo>/build)
#   FI_PROVIDER_PATH       where libopx-fi.so is (default $OPX_BUILD_DIR/.libs)
#   BENCH_REPEAT           runs per figure, best reported (default 3)
#   BENCH_QUICK=1          one run per figure and fewer iterations (a check
#                          that everything works, not a measurement)
#   BENCH_HOSTS_SIZES      bandwidth sizes (default "65536 1048576 16777216")
#   BENCH_HOSTS_MPI_SIZES  MPI sizes (default "8 16384 65536 1048576")
#   BENCH_HOSTS_LOSS=0     skip the 1 % loss part
#   BENCH_HOSTS_AUTH=0     skip the FI_OPX_AUTH part
#   BENCH_HOSTS_MPI=0      skip the Open MPI part
#   BENCH_HOSTS_M15=0      skip the MTU 1500 part (opx and tcp bandwidth on
#                          hosts whose links are all at MTU 1500, loss-free
#                          and with 1 % and 5 % of every IP packet dropped)
#   BENCH_HOSTS_M15_SIZES  its sizes (default "1048576 16777216")
#   BENCH_HOSTS_MANY=0     skip the many-hosts collectives
#   BENCH_HOSTS_MANY_N     its hosts (default 8; 2 ranks each)
#   BENCH_HOSTS_MANY_SIZES its sizes (default "8 1024 65536 1048576")
#   BENCH_HOSTS_DEADLINE   seconds for the whole script (default 1000, quick 420)
#   HOSTS_MTU              link MTU of the hosts (hosts.sh; default 9000)
#   BENCH_OUT              where the tables (bench-hosts.txt) go
set -u

BENCH_NAME=bench-hosts.sh
# shellcheck source=scripts/bench-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"

SRC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HOSTS=$SRC_DIR/scripts/hosts.sh
# this run owns the hosts it brings up (hosts.sh: owner)
export HOSTS_OWNER=$$
P=opxb
SRV_NS=${P}1
CLI_NS=${P}2
SRV_ADDR=198.18.0.1
QUICK=${BENCH_QUICK:-0}
SIZES=${BENCH_HOSTS_SIZES:-"65536 1048576 16777216"}
MPI_SIZES=${BENCH_HOSTS_MPI_SIZES:-"8 16384 65536 1048576"}
if [ "$QUICK" = 1 ]; then
	REPEAT=${BENCH_REPEAT:-1}
	LAT_ITERS=2000 LOSS_LAT_ITERS=500 FLOOR_ITERS=2000 FLOOR_WARMUP=200
	RATE_ITERS=200 TARGET=0.1
	RUN_TMO=20 LOSS_TMO=45 MPI_TMO=60 DEADLINE_S=420
else
	LAT_ITERS=20000 LOSS_LAT_ITERS=2000 FLOOR_ITERS=20000 FLOOR_WARMUP=1000
	RATE_ITERS=1000 TARGET=0.3
	RUN_TMO=30 LOSS_TMO=90 MPI_TMO=120 DEADLINE_S=1000
fi
START=$SECONDS
DEADLINE=$((START + ${BENCH_HOSTS_DEADLINE:-$DEADLINE_S}))
# The libfabric part stops early enough to leave the MPI part its time.
MPI_RESERVE=$((30 * REPEAT))
[ "${BENCH_HOSTS_MPI:-1}" = 0 ] && MPI_RESERVE=0
PORT=$((20000 + RANDOM % 30000))
BIN=$OPX_BUILD_DIR/test/bench
OUTFILE=$BENCH_OUT/bench-hosts.txt
FABS=(opx tcp udp)
CRC=0 SRC=0 # statuses of the last run_pair

declare -A VAL # "<cond>/<prov>/<metric>" -> best figure, fail or skip
FAILURES=()
NOTES=()

# ---- preconditions --------------------------------------------------------
if ! reason=$(bash "$HOSTS" check 2>&1); then
	echo "SKIP: bench-hosts.sh: no hosts in network namespaces here: ${reason#hosts.sh: }"
	exit 0
fi
for t in opx_msgrate opx_bw udp_floor; do
	if [ ! -x "$BIN/$t" ]; then
		echo "bench-hosts.sh: $BIN/$t not built (run make in $OPX_BUILD_DIR)" >&2
		exit 1
	fi
done
if ! command -v fi_pingpong >/dev/null 2>&1; then
	echo "bench-hosts.sh: fi_pingpong not found (Debian package libfabric-bin)" >&2
	exit 1
fi

# Processes still in our namespaces (a server its client left behind, an
# orted of a killed mpirun): deleting a namespace does not end them.
kill_leftovers() {
	local ns pids
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -xE "${P}[0-9]+"); do
		[ -e "/run/netns/$ns" ] || continue
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] || continue
		# shellcheck disable=SC2086 # one pid per word
		kill $pids 2>/dev/null
		sleep 0.5
		pids=$(ip netns pids "$ns" 2>/dev/null)
		# shellcheck disable=SC2086
		[ -n "$pids" ] && kill -9 $pids 2>/dev/null
	done
	return 0
}

cleanup() {
	kill_leftovers
	bash "$HOSTS" down "$P" >/dev/null 2>&1
	rm -rf "$tmp"
}

# ---- the hosts ------------------------------------------------------------
if ! bash "$HOSTS" up 2 "$P" >"$tmp/up" 2>&1; then
	echo "bench-hosts.sh: cannot make the hosts: $(grep -v '^[[:space:]]*$' "$tmp/up" | tail -n 1)" >&2
	others=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -vxE "${P}[0-9]+" | tr '\n' ' ')
	if grep -q 'already' "$tmp/up"; then
		echo "bench-hosts.sh: another hosts.sh prefix (or this one) is up${others:+ (namespaces: $others)};" \
			"only one can be up at a time: run again once it is down" >&2
	fi
	rm -rf "$tmp"
	exit 1
fi
# From here on the hosts are ours: take them down however the script ends.
trap cleanup EXIT
trap 'exit 130' INT TERM
MTU=$(cat "${TMPDIR:-/tmp}/opx-hosts-$P/mtu" 2>/dev/null || echo '?')

OOB_OK=1 # opx_msgrate/opx_bw meet over a TCP socket on any address

# ---- helpers ----------------------------------------------------------------

# hsize BYTES: 8 B, 64 KiB, 1 MiB...
hsize() {
	awk -v s="$1" 'BEGIN {
		if (s >= 1048576 && s % 1048576 == 0) printf "%d MiB", s / 1048576;
		else if (s >= 1024 && s % 1024 == 0) printf "%d KiB", s / 1024;
		else printf "%d B", s }'
}

# run_pair OUT TMO OOB SERVER_CMD... -- CLIENT_CMD...: bench_pair
# (bench-common.sh) with the server in $SRV_NS and the client in $CLI_NS;
# OOB is kept for the callers' argument order.
PAIR_SRV=(bash "$HOSTS" run "$SRV_NS")
PAIR_CLI=(bash "$HOSTS" run "$CLI_NS")
PAIR_NS=$SRV_NS
PAIR_WAIT_S=10
run_pair() {
	local out=$1 tmo=$2
	shift 3
	bench_pair "$out" "$tmo" "$@"
}

# record KEY KIND VALUE OUT WHAT RUN: keep VALUE, or mark the cell fail and
# say why (the run failed or printed no figure).
record() {
	local key=$1 kind=$2 v=$3 out=$4 what=$5 run=$6
	if [ "$CRC" -eq 0 ] && [ "$SRC" -eq 0 ] && [ -n "$v" ]; then
		keep "$key" "$kind" "$v"
	else
		VAL[$key]=fail
		FAILURES+=("$what, run $run: client rc $CRC, server rc $SRC: $(why "$out" "$out.srv")")
	fi
}

# ---- measurements -----------------------------------------------------------

# prov_split PROV: opx-off and opx-full are opx with FI_OPX_AUTH=off|full,
# opx-crc is opx with FI_OPX_UDP_CRC=1; sets PV (the provider to ask for)
# and PRE (the command's env prefix).
prov_split() {
	PV=$1
	PRE=()
	case $1 in
	opx-off | opx-full | opx-header)
		PV=opx
		PRE=(env "FI_OPX_AUTH=${1#opx-}")
		;;
	opx-crc)
		PV=opx
		PRE=(env FI_OPX_UDP_CRC=1)
		;;
	esac
}

# m_floor RUN [-u]: raw UDP one-way time (-u: the client does not connect).
m_floor() {
	local out=$tmp/floor.$1${2:-} v m key=raw
	[ "${2:-}" = -u ] && key=rawu
	run_pair "$out" $RUN_TMO 0 "$BIN/udp_floor" -s -p @PORT@ -T $((RUN_TMO - 5)) -- \
		"$BIN/udp_floor" -c "$SRV_ADDR" -p @PORT@ -S 8 -n $FLOOR_ITERS -W $FLOOR_WARMUP \
		-T $((RUN_TMO - 5)) ${2:-}
	v=$(sed -n 's/^udp_floor .* one_way_us=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
	m=$(sed -n 's/^udp_floor .* rtt_mean_us=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
	record nl/$key/lat min "$v" "$out" "raw UDP latency${2:+ (unconnected client)}" "$1"
	[ -n "$m" ] && keep nl/$key/mean min "$(awk -v m="$m" 'BEGIN { printf "%.2f", m / 2 }')"
	v=$(sed -n 's/^udp_floor .* lost=\([0-9]*\).*/\1/p' "$out" | tail -n 1)
	[ -n "$v" ] && [ "$v" != 0 ] && NOTES+=("raw UDP run $1: $v datagrams resent after 100 ms (left out of the figure)")
}

# m_lat COND PROV RUN: fi_pingpong 8 B, mean one-way usec.
m_lat() {
	local cond=$1 prov=$2 run=$3 out=$tmp/lat.$1.$2.$3 v iters=$LAT_ITERS tmo=$RUN_TMO
	[ "$cond" = loss ] && iters=$LOSS_LAT_ITERS tmo=$LOSS_TMO
	prov_split "$prov"
	local pp=("${PRE[@]}" fi_pingpong -p "$PV" -e rdm -m tagged -S 8 -I "$iters")
	run_pair "$out" "$tmo" 0 "${pp[@]}" -B @PORT@ -- "${pp[@]}" -P @PORT@ "$SRV_ADDR"
	# columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
	v=$(awk '$1 != "bytes" && NF >= 8 && $7 ~ /^[0-9.]+$/ { v = $7 } END { print v }' "$out")
	record "$cond/$prov/lat" min "$v" "$out" "$prov latency 8 B$([ "$cond" = loss ] && echo ', 1 % loss')" "$run"
}

# m_rate COND PROV RUN: opx_msgrate 8 B, messages/s.
m_rate() {
	local cond=$1 prov=$2 run=$3 out=$tmp/rate.$1.$2.$3 v tmo=$RUN_TMO
	[ "$cond" = loss ] && tmo=$LOSS_TMO
	prov_split "$prov"
	run_pair "$out" "$tmo" 1 "${PRE[@]}" "$BIN/opx_msgrate" -p "$PV" -P @PORT@ -T $((tmo - 5)) -- \
		"${PRE[@]}" "$BIN/opx_msgrate" -p "$PV" -P @PORT@ -T $((tmo - 5)) -S 8 -n $RATE_ITERS \
		"$SRV_ADDR"
	v=$(sed -n 's/^msgrate .* msgs_per_sec=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
	record "$cond/$prov/rate" max "$v" "$out" "$prov rate 8 B$([ "$cond" = loss ] && echo ', 1 % loss')" "$run"
}

# m_bw COND PROV SIZE RUN: opx_bw -m bw, MB/s.
m_bw() {
	local cond=$1 prov=$2 size=$3 run=$4 out=$tmp/bw.$1.$2.$3.$4 v tmo=$RUN_TMO
	[ "$cond" = loss ] && tmo=$LOSS_TMO
	prov_split "$prov"
	run_pair "$out" "$tmo" 1 "${PRE[@]}" "$BIN/opx_bw" -p "$PV" -P @PORT@ -T $((tmo - 5)) -- \
		"${PRE[@]}" "$BIN/opx_bw" -p "$PV" -P @PORT@ -T $((tmo - 5)) -m bw -S "$size" \
		-t "$TARGET" "$SRV_ADDR"
	v=$(sed -n 's/^bw prov=.* mode=bw .* MBps=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
	record "$cond/$prov/bw$size" max "$v" "$out" \
		"$prov bandwidth $(hsize "$size")$([ "$cond" = loss ] && echo ', 1 % loss')" "$run"
}

# fab_pass COND RUN PROV...: one run of every libfabric figure of COND for
# each PROV, providers interleaved metric by metric.
fab_pass() {
	local cond=$1 run=$2 prov size label="no loss"
	shift 2
	[ "$cond" = loss ] && label="1 % loss"
	[ "$cond" = auth ] && label="FI_OPX_AUTH"
	for prov in "$@"; do
		[ $SECONDS -ge $fab_deadline ] && return
		echo "  [$label run $run/$REPEAT] $prov latency 8 B" >&2
		m_lat "$cond" "$prov" "$run"
	done
	[ $OOB_OK = 1 ] || return
	for prov in "$@"; do
		[ $SECONDS -ge $fab_deadline ] && return
		echo "  [$label run $run/$REPEAT] $prov rate 8 B" >&2
		m_rate "$cond" "$prov" "$run"
	done
	for size in $SIZES; do
		for prov in "$@"; do
			[ $SECONDS -ge $fab_deadline ] && return
			echo "  [$label run $run/$REPEAT] $prov bandwidth $(hsize "$size")" >&2
			m_bw "$cond" "$prov" "$size" "$run"
		done
	done
}

# prov_name SHORT: the provider fi_info gives for an RDM endpoint of SHORT.
prov_name() {
	local n
	n=$(fi_info -p "$1" -t FI_EP_RDM 2>/dev/null | sed -n 's/^ *provider: *//p' | head -n 1)
	echo "${n:-$1}"
}

echo "opx across two hosts: network namespaces $SRV_NS ($SRV_ADDR, servers) and $CLI_NS" \
	"(198.18.0.2, clients) on a bridge, MTU $MTU"
echo "$(uname -n), $(nproc) cores, $pinning, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "libfabric $(pkg-config --modversion libfabric 2>/dev/null || echo '?'), FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
TCP_NAME=$(prov_name tcp)
UDP_NAME=$(prov_name udp)
echo "tcp = $TCP_NAME, udp = $UDP_NAME (fi_info -p tcp|udp -t FI_EP_RDM)"
[ "$QUICK" = 1 ] && echo "BENCH_QUICK=1: fewer iterations, a functional check rather than a measurement"
echo

fab_deadline=$((DEADLINE - MPI_RESERVE))
for ((r = 1; r <= REPEAT; r++)); do
	if [ $SECONDS -lt $fab_deadline ]; then
		echo "  [no loss run $r/$REPEAT] raw UDP latency 8 B" >&2
		m_floor "$r"
		m_floor "$r" -u
	fi
	fab_pass nl "$r" "${FABS[@]}"
done

LOSS_OK=0
if [ "${BENCH_HOSTS_LOSS:-1}" != 0 ]; then
	if bash "$HOSTS" drop "$SRV_NS" 1 >"$tmp/drop" 2>&1 &&
		bash "$HOSTS" drop "$CLI_NS" 1 >>"$tmp/drop" 2>&1; then
		LOSS_OK=1
		for ((r = 1; r <= REPEAT; r++)); do
			fab_pass loss "$r" opx tcp
		done
	else
		NOTES+=("1 % loss part skipped: hosts.sh drop: $(why "$tmp/drop")")
	fi
	bash "$HOSTS" drop "$SRV_NS" 0 >/dev/null 2>&1
	bash "$HOSTS" drop "$CLI_NS" 0 >/dev/null 2>&1
fi

AUTH_OK=0
if [ "${BENCH_HOSTS_AUTH:-1}" != 0 ]; then
	AUTH_OK=1
	for ((r = 1; r <= REPEAT; r++)); do
		fab_pass auth "$r" opx-off opx-header opx-full opx-crc
	done
fi

# ---- Open MPI: mpi_bw across the hosts ---------------------------------------
MPI_OK=0
MPI_LABELS=(opx tcp)

# The bench-common.sh mpi_run hooks: one mpirun of mpi_bw over every size
# (lat, bw), pml cm + mtl ofi on opx or ob1 + btl tcp.
mpi_cmd() {
	case $1 in
	opx)
		CMD=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include opx
			-x FI_PROVIDER=opx -x FI_PROVIDER_PATH)
		;;
	tcp)
		# shellcheck disable=SC2054 # the comma belongs to the MCA value
		CMD=(-mca pml ob1 -mca btl tcp,self)
		;;
	esac
	CMD=(mpirun --allow-run-as-root "${HOSTARGS[@]}" -np 2 --map-by node --bind-to none "${CMD[@]}"
		"${MPI_PIN[@]}" "$MPI_BW" -l "$1" -m all -t "$TARGET" -s "${MPI_SIZES// /,}")
}
mpi_points() {
	local size mode
	for size in $MPI_SIZES; do
		for mode in lat bw; do echo "$mode$size"; done
	done
}
mpi_point() {
	local mode=${2%%[0-9]*} size=${2##*[a-z]}
	KEY=mpi/$1/$2 KIND=$(kind "$mode") WHAT="$mode $(hsize "$size")"
	V=$(mpi_fig "$3" "^mpi label=$1 mode=$mode size=$size " "$([ "$mode" = lat ] && echo usec || echo MBps)")
}
mpi_after() { kill_leftovers; }

if [ "${BENCH_HOSTS_MPI:-1}" != 0 ]; then
	MPI_BW=$tmp/mpi_bw
	if ! mpi_build mpi_bw "$MPI_BW"; then
		:
	elif ! hostargs=$(bash "$HOSTS" mpirun-args "$P" 2>&1); then
		FAILURES+=("Open MPI: hosts.sh mpirun-args $P: $hostargs")
	else
		read -r -a HOSTARGS <<<"$hostargs"
		MPI_OK=1
		# Each orted believes it has a node of its own and would bind its
		# rank to core 0: rank r goes to core r instead, as for libfabric.
		MPI_PIN=()
		# shellcheck disable=SC2016 # expanded by the rank's shell
		[ ${#PIN_SRV[@]} -gt 0 ] && MPI_PIN=(sh -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$0" "$@"')
		# Debian's openmpi-mca-params.conf has "mtl = ^ofi"; the command
		# line wins.
		# A run needs about 10 s; do not start one that cannot finish.
		mpi_runs 15
	fi
fi

# ---- MTU 1500 and many hosts: bench-hosts-more.sh --------------------------------
# shellcheck source=scripts/bench-hosts-more.sh
. "$(dirname "${BASH_SOURCE[0]}")/bench-hosts-more.sh"

# ---- tables -------------------------------------------------------------------

# v KEY: the figure of a cell ("skip" when no run reached it).
v() { echo "${VAL[$1]:-skip}"; }

# behind KIND A B: "<" when opx (A) is behind the peer (B): a latency
# (KIND lat) above it, a rate or bandwidth (KIND bw) below it; else "".
behind() {
	local r
	r=$(ratio "$2" "$3")
	[ "$r" = - ] && return 0
	awk -v r="$r" -v k="$1" 'BEGIN { exit !(k == "lat" ? r + 0 > 1 : r + 0 < 1) }' && echo "<"
}

# rate8 MBPS: messages/s of 8-byte messages from a bandwidth in MB/s.
rate8() {
	[[ $1 =~ ^[0-9.]+$ ]] || { echo "$1"; return; }
	awk -v b="$1" 'BEGIN { printf "%.0f", b * 1e6 / 8 }'
}

# target TEXT A B LIMIT KIND: one line "TEXT: A / B = R: met|not met", met
# when R <= LIMIT (KIND le) or R >= LIMIT (KIND ge).
target() {
	local text=$1 a=$2 b=$3 lim=$4 kind=$5 r res
	r=$(ratio "$a" "$b")
	if [ "$r" = - ]; then
		res="no figure"
	elif awk -v r="$r" -v l="$lim" -v k="$kind" 'BEGIN { exit !(k == "le" ? r + 0 <= l + 0 : r + 0 >= l + 0) }'; then
		res=met
	else
		res="not met"
	fi
	printf '  %-52s %10s / %-10s = %5s  %s\n' "$text:" "$a" "$b" "$r" "$res"
}

for f in hosts-bw hosts-mpi-lat hosts-mpi-bw; do
	: >"$BENCH_OUT/$f.dat"
done
{
	echo "no loss: best of $REPEAT; latency = fi_pingpong -I $LAT_ITERS mean one-way usec (raw UDP: half"
	echo "the median round trip of $FLOOR_ITERS), rate = opx_msgrate messages/s, bandwidth = opx_bw MB/s"
	printf '%-22s %12s %12s %12s %12s %8s %8s\n' metric opx tcp udp "raw UDP" opx/tcp opx/udp
	printf '%-22s %12s %12s %12s %12s %8s %8s %s\n' "latency 8 B (us)" "$(v nl/opx/lat)" "$(v nl/tcp/lat)" \
		"$(v nl/udp/lat)" "$(v nl/raw/lat)" "$(ratio "$(v nl/opx/lat)" "$(v nl/tcp/lat)")" \
		"$(ratio "$(v nl/opx/lat)" "$(v nl/udp/lat)")" "$(behind lat "$(v nl/opx/lat)" "$(v nl/tcp/lat)")"
	printf '%-22s %12s %12s %12s %12s %8s %8s %s\n' "rate 8 B (msg/s)" "$(v nl/opx/rate)" "$(v nl/tcp/rate)" \
		"$(v nl/udp/rate)" - "$(ratio "$(v nl/opx/rate)" "$(v nl/tcp/rate)")" \
		"$(ratio "$(v nl/opx/rate)" "$(v nl/udp/rate)")" "$(behind bw "$(v nl/opx/rate)" "$(v nl/tcp/rate)")"
	for size in $SIZES; do
		printf '%-22s %12s %12s %12s %12s %8s %8s %s\n' "bw $(hsize "$size") (MB/s)" "$(v "nl/opx/bw$size")" \
			"$(v "nl/tcp/bw$size")" "$(v "nl/udp/bw$size")" - \
			"$(ratio "$(v "nl/opx/bw$size")" "$(v "nl/tcp/bw$size")")" \
			"$(ratio "$(v "nl/opx/bw$size")" "$(v "nl/udp/bw$size")")" \
			"$(behind bw "$(v "nl/opx/bw$size")" "$(v "nl/tcp/bw$size")")"
		bench_dat hosts-bw "$size" "$(v "nl/opx/bw$size")" "$(v "nl/tcp/bw$size")" "$(v "nl/udp/bw$size")"
	done
	bench_plot hosts-bw "bandwidth between two namespace hosts (opx_bw)" MB/s opx tcp udp
	echo "(raw UDP one-way from the mean round trip instead: $(v nl/raw/mean) us; with a client that does"
	echo " not connect, as a transport with one socket for all its peers cannot: median $(v nl/rawu/lat) us,"
	echo " mean $(v nl/rawu/mean) us)"
	echo
	if [ $LOSS_OK = 1 ]; then
		echo "1 % of the UDP datagrams arriving in each host dropped (hosts.sh drop, nftables), best of $REPEAT;"
		echo "latency over -I $LOSS_LAT_ITERS.  tcp's segments are TCP, never dropped: its column is a"
		echo "reference run under the same conditions, not tcp under loss"
		printf '%-22s %12s %12s %8s %14s\n' metric opx tcp opx/tcp "opx loss/none"
		printf '%-22s %12s %12s %8s %14s %s\n' "latency 8 B (us)" "$(v loss/opx/lat)" "$(v loss/tcp/lat)" \
			"$(ratio "$(v loss/opx/lat)" "$(v loss/tcp/lat)")" "$(ratio "$(v loss/opx/lat)" "$(v nl/opx/lat)")" \
			"$(behind lat "$(v loss/opx/lat)" "$(v loss/tcp/lat)")"
		printf '%-22s %12s %12s %8s %14s %s\n' "rate 8 B (msg/s)" "$(v loss/opx/rate)" "$(v loss/tcp/rate)" \
			"$(ratio "$(v loss/opx/rate)" "$(v loss/tcp/rate)")" "$(ratio "$(v loss/opx/rate)" "$(v nl/opx/rate)")" \
			"$(behind bw "$(v loss/opx/rate)" "$(v loss/tcp/rate)")"
		for size in $SIZES; do
			printf '%-22s %12s %12s %8s %14s %s\n' "bw $(hsize "$size") (MB/s)" "$(v "loss/opx/bw$size")" \
				"$(v "loss/tcp/bw$size")" "$(ratio "$(v "loss/opx/bw$size")" "$(v "loss/tcp/bw$size")")" \
				"$(ratio "$(v "loss/opx/bw$size")" "$(v "nl/opx/bw$size")")" \
				"$(behind bw "$(v "loss/opx/bw$size")" "$(v "loss/tcp/bw$size")")"
		done
		echo
	fi
	if [ $AUTH_OK = 1 ]; then
		echo "the udp wire's MAC (FI_OPX_AUTH) and payload CRC (crc = header with FI_OPX_UDP_CRC=1),"
		echo "no loss, best of $REPEAT, modes interleaved run by run:"
		printf '%-22s %12s %12s %12s %12s %11s %9s %11s\n' metric off header full crc \
			header/off full/off crc/header
		for m in lat rate $(for z in $SIZES; do echo "bw$z"; done); do
			case $m in
			lat) label="latency 8 B (us)" ;;
			rate) label="rate 8 B (msg/s)" ;;
			*) label="bw $(hsize "${m#bw}") (MB/s)" ;;
			esac
			printf '%-22s %12s %12s %12s %12s %11s %9s %11s\n' "$label" "$(v "auth/opx-off/$m")" \
				"$(v "auth/opx-header/$m")" "$(v "auth/opx-full/$m")" "$(v "auth/opx-crc/$m")" \
				"$(ratio "$(v "auth/opx-header/$m")" "$(v "auth/opx-off/$m")")" \
				"$(ratio "$(v "auth/opx-full/$m")" "$(v "auth/opx-off/$m")")" \
				"$(ratio "$(v "auth/opx-crc/$m")" "$(v "auth/opx-header/$m")")"
		done
		echo
	fi
	if [ $MPI_OK = 1 ]; then
		echo "Open MPI $(mpirun --version 2>/dev/null | head -n 1 | awk '{print $NF}'), 1 rank per host, best of $REPEAT mpirun:"
		echo "  opx = pml cm + mtl ofi on opx; tcp = pml ob1 + btl tcp,self"
		echo "  latency = half round trip (us), bandwidth = windows of 64 MPI_Isend (MB/s)"
		echo "  (\"<\": opx behind ob1 tcp in that column)"
		printf '%9s %12s %12s %8s %1s %12s %12s %8s\n' size "lat opx" "lat tcp" opx/tcp "" "bw opx" "bw tcp" opx/tcp
		for size in $MPI_SIZES; do
			printf '%9s %12s %12s %8s %1s %12s %12s %8s %s\n' "$size" "$(v "mpi/opx/lat$size")" \
				"$(v "mpi/tcp/lat$size")" "$(ratio "$(v "mpi/opx/lat$size")" "$(v "mpi/tcp/lat$size")")" \
				"$(behind lat "$(v "mpi/opx/lat$size")" "$(v "mpi/tcp/lat$size")")" \
				"$(v "mpi/opx/bw$size")" "$(v "mpi/tcp/bw$size")" \
				"$(ratio "$(v "mpi/opx/bw$size")" "$(v "mpi/tcp/bw$size")")" \
				"$(behind bw "$(v "mpi/opx/bw$size")" "$(v "mpi/tcp/bw$size")")"
			bench_dat hosts-mpi-lat "$size" "$(v "mpi/opx/lat$size")" "$(v "mpi/tcp/lat$size")"
			bench_dat hosts-mpi-bw "$size" "$(v "mpi/opx/bw$size")" "$(v "mpi/tcp/bw$size")"
		done
		if [[ " $MPI_SIZES " == *" 8 "* ]]; then
			printf '  8 B message rate (windows of 64): opx %s msg/s, tcp %s msg/s, opx/tcp %s %s\n' \
				"$(rate8 "$(v mpi/opx/bw8)")" "$(rate8 "$(v mpi/tcp/bw8)")" \
				"$(ratio "$(v mpi/opx/bw8)" "$(v mpi/tcp/bw8)")" \
				"$(behind bw "$(v mpi/opx/bw8)" "$(v mpi/tcp/bw8)")"
		fi
		bench_plot hosts-mpi-lat "Open MPI latency across two namespace hosts" usec "opx (pml cm)" "ob1 tcp"
		bench_plot hosts-mpi-bw "Open MPI bandwidth across two namespace hosts" MB/s "opx (pml cm)" "ob1 tcp"
		echo
	fi

	m15_table
	many_table
	echo "targets (issue 7; reported, not enforced):"
	target "8 B latency at most 0.7x tcp" "$(v nl/opx/lat)" "$(v nl/tcp/lat)" 0.7 le
	target "8 B latency within 1.3x raw UDP" "$(v nl/opx/lat)" "$(v nl/raw/lat)" 1.3 le
	target "8 B latency within 1.3x raw UDP, mean to mean" "$(v nl/opx/lat)" "$(v nl/raw/mean)" 1.3 le
	for size in $SIZES; do
		target "$(hsize "$size") bandwidth at least tcp's" "$(v "nl/opx/bw$size")" "$(v "nl/tcp/bw$size")" 1 ge
	done
	if [ $LOSS_OK = 1 ]; then
		for size in $SIZES; do
			target "1 % loss: $(hsize "$size") bw at least half of loss-free" \
				"$(v "loss/opx/bw$size")" "$(v "nl/opx/bw$size")" 0.5 ge
		done
	fi
	m15_targets
	if [ $AUTH_OK = 1 ]; then
		target "FI_OPX_AUTH=header: latency within 1.05x off" "$(v auth/opx-header/lat)" \
			"$(v auth/opx-off/lat)" 1.05 le
		for size in $SIZES; do
			target "header: $(hsize "$size") bw within 3 % of off" "$(v "auth/opx-header/bw$size")" \
				"$(v "auth/opx-off/bw$size")" 0.97 ge
			target "full: $(hsize "$size") bw within 25 % of off" "$(v "auth/opx-full/bw$size")" \
				"$(v "auth/opx-off/bw$size")" 0.75 ge
		done
	fi
	echo "targets (issue 29: across hosts at NIC speed; reported, not enforced):"
	target "8 B rate at least 4x tcp's" "$(v nl/opx/rate)" "$(v nl/tcp/rate)" 4 ge
	target "8 B latency within 1.15x raw UDP, mean to mean" "$(v nl/opx/lat)" "$(v nl/raw/mean)" 1.15 le
	if [[ " $SIZES " == *" 1048576 "* && " $SIZES " == *" 16777216 "* ]]; then
		target "16 MiB bandwidth at least 1 MiB's" "$(v nl/opx/bw16777216)" "$(v nl/opx/bw1048576)" 1 ge
	fi
	if [ $MPI_OK = 1 ]; then
		[[ " $MPI_SIZES " == *" 8 "* ]] &&
			target "MPI 8 B rate at least 2x ob1 tcp's" "$(v mpi/opx/bw8)" "$(v mpi/tcp/bw8)" 2 ge
		for size in $MPI_SIZES; do
			target "MPI $(hsize "$size") latency at most ob1 tcp's" "$(v "mpi/opx/lat$size")" \
				"$(v "mpi/tcp/lat$size")" 1 le
			target "MPI $(hsize "$size") bandwidth at least ob1 tcp's" "$(v "mpi/opx/bw$size")" \
				"$(v "mpi/tcp/bw$size")" 1 ge
		done
	fi
	many_targets
	echo "(fi_pingpong prints only a mean: the first raw UDP line sets it against the floor's median, which"
	echo " favours the floor by the jitter both share; the second against the floor's mean, like with like)"
	echo

	bench_footer "failures (a cell marked fail had at least one failed run):"
	echo "(latency: ratio < 1 means opx is faster; rate and bandwidth: ratio > 1 means opx is faster;"
	echo " \"<\" ends a row where opx is behind tcp, or ob1 tcp)"
	bench_plots_done
} | tee "$OUTFILE"
echo "tables: $OUTFILE"
echo "elapsed $((SECONDS - START))s"
