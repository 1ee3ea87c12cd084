#!/bin/bash
# One-sided operations between processes (opx_rma_test): a target and
# three initiators, once with 0-based offsets and user keys, once with
# FI_MR_VIRT_ADDR and provider keys; then large operations by chunks only
# (FI_OPX_RMA_CMA=0) and with targets that refuse CMA (FI_OPX_RNDV_CMA=0:
# the initiators try, are told no, and resend by chunks).  Then over the
# udp wire on this host (FI_OPX_WIRE=udp: chunks of the path's datagram
# size, never CMA), once more with 1 % of the datagrams dropped (fixed
# seed, the telemetry must count retransmissions), and between two hosts
# made of network namespaces (scripts/hosts.sh: the target on one, the
# initiators on the other); where namespaces cannot be made that part is
# reported as SKIP with the reason.  See opx_rma_test.c for what is
# checked.  Some runs (-n) leave the initiators out of the target's AV, as
# Open MPI's osc rdma does: the target answers them all the same.
#   OPX_BUILD_DIR     automake build dir (binary + .libs/libopx-fi.so)
#   FI_PROVIDER_PATH  where libopx-fi.so lives (default $OPX_BUILD_DIR/.libs)
#   TEST_TIMEOUT=300  timeout in seconds for each run
set -u
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
# this run owns the hosts it brings up (hosts.sh: owner)
export HOSTS_OWNER=$$
bin=${OPX_BUILD_DIR:-.}/test/integration/opx_rma_test
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-${OPX_BUILD_DIR:-.}/.libs}
export FI_PROVIDER=opx
if [ ! -x "$bin" ] || [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
	echo "FAIL: $bin or $FI_PROVIDER_PATH/libopx-fi.so missing (set OPX_BUILD_DIR)"
	exit 1
fi
case "$bin" in /*) ;; *) bin=$PWD/$bin ;; esac
FI_PROVIDER_PATH=$(cd "$FI_PROVIDER_PATH" && pwd) || exit 1
# libfabric's crash handler writes *.btr files into the working directory
tmp=$(mktemp -d /tmp/opx-rma-test.XXXXXX) || exit 1
prefix=opxrma
hosts_held=0
cleanup() {
	[ $hosts_held = 1 ] && bash "$hosts" down $prefix >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
status=0
ran=0

finish() { # rc label start
	[ "$1" = 124 ] && echo "FAIL: opx_rma_test $2 timed out"
	echo "# exit $1, $(( $(date +%s) - $3 ))s"
	ran=$((ran + 1))
	[ "$1" = 0 ] || status=$1
}

# ---- one host: shm, then the udp wire -------------------------------------
drop="FI_OPX_WIRE=udp FI_OPX_FAULT_DROP=1 FI_OPX_FAULT_SEED=3"
# -n: the target's AV holds none of its initiators (Open MPI's osc rdma)
for run in ":" "-v:" "-n:FI_OPX_RMA_CMA=0" "-v:FI_OPX_RNDV_CMA=0" \
	":FI_OPX_WIRE=udp" "-n:FI_OPX_WIRE=udp FI_OPX_RMA_CMA=0" "-v:$drop"; do
	mode=${run%%:*}
	envs=${run#*:}
	echo "# $envs $bin -p opx $mode"
	start=$(date +%s)
	if [ "$envs" = "$drop" ]; then
		# the loss must really have happened: count the retransmissions
		env $envs FI_OPX_STATS=stderr timeout -k 10 "${TEST_TIMEOUT:-300}" "$bin" -p opx \
			$mode 2>"$tmp/stats"
		rc=$?
		grep -v "^ \|^opx stats" "$tmp/stats" >&2
		if [ $rc = 0 ] && ! grep -q "udp wire: retransmits [1-9]" "$tmp/stats"; then
			echo "FAIL: no retransmissions counted under 1 % loss"
			rc=1
		fi
	else
		env $envs timeout -k 10 "${TEST_TIMEOUT:-300}" "$bin" -p opx $mode
		rc=$?
	fi
	finish $rc "$envs $mode" "$start"
done

# ---- two hosts (network namespaces) ---------------------------------------
# hosts.sh holds 198.18.0.0/24 for one set of hosts at a time: it waits
# (at most 10 minutes) while another run's hosts are up.
hosts_up() {
	if HOSTS_WAIT_BUSY=600 bash "$hosts" up 2 $prefix >"$tmp/up" 2>&1; then
		hosts_held=1
		grep "waiting up to" "$tmp/up" | sed 's/^/# /'
		return 0
	fi
	cat "$tmp/up"
	return 1
}

# the target on ${prefix}1 listens on a free TCP port, the initiators on
# ${prefix}2 connect to it; both over the udp wire between the hosts
across() { # mode
	local mode=$1 port='' i spid crc src start out
	start=$(date +%s)
	echo "# 2 hosts: $bin -p opx $mode -l 0 on ${prefix}1, -c 198.18.0.1:PORT on ${prefix}2"
	# a file of this run's own: the previous target's output must never
	# be read for this one's port (a reused file is truncated only when
	# the background shell gets to run, on a busy machine much later)
	out=$(mktemp "$tmp/target.XXXXXX") || return 1
	timeout -k 10 "${TEST_TIMEOUT:-300}" bash "$hosts" run ${prefix}1 "$bin" -p opx $mode -l 0 \
		>"$out" 2>&1 &
	spid=$!
	# until it says it listens, exits, or 60 s pass
	for ((i = 0; i < 600; i++)); do
		port=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$out")
		[ -n "$port" ] && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$port" ]; then
		echo "FAIL: the target on ${prefix}1 did not start listening"
		kill $spid 2>/dev/null
		wait $spid
		cat "$out"
		finish 1 "2 hosts $mode" "$start"
		return
	fi
	timeout -k 10 "${TEST_TIMEOUT:-300}" bash "$hosts" run ${prefix}2 "$bin" -p opx $mode \
		-c 198.18.0.1:"$port"
	crc=$?
	wait $spid
	src=$?
	sed 's/^/target: /' "$out"
	[ $crc = 0 ] || echo "FAIL: initiators on ${prefix}2 exited with $crc"
	[ $src = 0 ] || echo "FAIL: target on ${prefix}1 exited with $src"
	[ $crc != 0 ] && src=$crc
	finish $src "2 hosts $mode" "$start"
}

if ! why=$(bash "$hosts" check 2>&1); then
	echo "SKIP: RMA between hosts in network namespaces: $why"
	[ $ran = 0 ] && exit 77
elif ! hosts_up; then
	echo "FAIL: could not create 2 hosts"
	status=1
else
	across ""
	across "-v -n"
	bash "$hosts" down $prefix >/dev/null 2>&1
	hosts_held=0
fi
exit $status
