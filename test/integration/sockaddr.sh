#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# sockaddr.sh - two processes that find each other with socket addresses
# only (opx_sockaddr_test: addr_format FI_SOCKADDR_IN or FI_SOCKADDR; the
# server's fi_av_straddr in a file, the client's fi_getname in-band; every
# size both ways, data and FI_SOURCE checked):
#
#  1. one host, shared memory (the names resolve through the registry),
#     in FI_SOCKADDR_IN and FI_SOCKADDR;
#  2. one host, every peer on the udp wire (FI_OPX_WIRE=udp);
#  3. two hosts: a pair of network namespaces of this test's own, joined
#     by a veth pair (198.18.0.1 and .2 inside them; nothing in the root
#     namespace, so it runs beside scripts/hosts.sh's hosts), in both
#     formats.  SKIP with the reason where namespaces cannot be made.
#
# Environment: FI_PROVIDER_PATH / OPX_BUILD_DIR as for pingpong.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=${OPX_BUILD_DIR:-.}/.libs
fi
FI_PROVIDER_PATH=$(cd "$FI_PROVIDER_PATH" && pwd) || exit 1
export FI_PROVIDER_PATH
prog=$(cd "${OPX_BUILD_DIR:-.}" && pwd)/test/integration/opx_sockaddr_test
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
fail=0
pass=0
work=$(mktemp -d "${TMPDIR:-/tmp}/opx-sockaddr.XXXXXX") || exit 1
ns1=
ns2=
cleanup() {
	[ -n "$ns1" ] && ip netns del "$ns1" 2>/dev/null
	[ -n "$ns2" ] && ip netns del "$ns2" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

result() { # name rc
	if [ "$2" = 0 ]; then
		echo "PASS: $1"
		pass=$((pass + 1))
	else
		echo "FAIL: $1 (rc $2)"
		fail=$((fail + 1))
	fi
}

# run LABEL "SERVER PREFIX" "CLIENT PREFIX" [opx_sockaddr_test args]: the
# server writes its address to a fresh file (whole: renamed into place);
# the client starts once it is there, or not at all when the server ended
# first or 30 s passed; both must pass.
run() {
	local label=$1 spre=$2 cpre=$3 n=$((pass + fail)) crc=1 end=$((SECONDS + 30))
	shift 3
	local addr=$work/addr.$n
	# shellcheck disable=SC2086 # the prefixes are words on purpose
	$spre timeout 150 "$prog" -s "$addr" "$@" >"$work/srv.$n" 2>&1 &
	local spid=$!
	: >"$work/cli.$n"
	while [ ! -e "$addr" ] && kill -0 $spid 2>/dev/null && [ $SECONDS -lt $end ]; do
		sleep 0.05
	done
	if [ -e "$addr" ]; then
		# shellcheck disable=SC2086
		$cpre timeout 150 "$prog" -c "$addr" "$@" >"$work/cli.$n" 2>&1
		crc=$?
	else
		echo "no server address within 30 s" >"$work/cli.$n"
		kill $spid 2>/dev/null
	fi
	wait $spid
	local src=$?
	if [ $crc != 0 ] || [ $src != 0 ]; then
		echo "  server (rc $src):"
		sed 's/^/    /' "$work/srv.$n" | tail -8
		echo "  client (rc $crc):"
		sed 's/^/    /' "$work/cli.$n" | tail -8
		result "$label" 1
	else
		grep -h "listening at\|server at" "$work/srv.$n" "$work/cli.$n" | sed 's/^/  /'
		result "$label" 0
	fi
}

# ---- 1, 2. one host -------------------------------------------------------
run "one host, shared memory, FI_SOCKADDR_IN" "" ""
run "one host, shared memory, FI_SOCKADDR" "" "" -a FI_SOCKADDR
run "one host, udp wire, FI_SOCKADDR_IN" "env FI_OPX_WIRE=udp" "env FI_OPX_WIRE=udp"

# ---- 3. two hosts ---------------------------------------------------------
why=
if [ "$(id -u)" != 0 ]; then
	why="not root: network namespaces need root"
elif ! command -v ip >/dev/null; then
	why="no 'ip' command (iproute2)"
else
	ns1=opxsa$$a
	ns2=opxsa$$b
	if ! ip netns add "$ns1" 2>/dev/null || ! ip netns add "$ns2" 2>/dev/null; then
		why="'ip netns add' fails here"
	elif ! ip -n "$ns1" link add eth0 type veth peer name eth0 netns "$ns2" 2>/dev/null; then
		why="cannot create a veth pair between namespaces"
	else
		for i in 1 2; do
			ns=$ns1
			[ $i = 2 ] && ns=$ns2
			ip -n "$ns" link set lo up &&
				ip -n "$ns" addr add "198.18.0.$i/24" dev eth0 &&
				ip -n "$ns" link set eth0 up || why="cannot configure $ns"
		done
	fi
fi
if [ -z "$why" ] && command -v ping >/dev/null; then
	# the link is up once a ping crosses it (at most 5 s)
	end=$((SECONDS + 5))
	until ip netns exec "$ns2" ping -c1 -W1 -q 198.18.0.1 >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || { why="no ping between the namespaces within 5 s"; break; }
		sleep 0.1
	done
fi
if [ -n "$why" ]; then
	echo "SKIP: two hosts in network namespaces: $why"
else
	run "two hosts, udp wire, FI_SOCKADDR_IN" "ip netns exec $ns1" "ip netns exec $ns2"
	run "two hosts, udp wire, FI_SOCKADDR" "ip netns exec $ns1" "ip netns exec $ns2" \
		-a FI_SOCKADDR
	if grep -q "server at fi_sockaddr_in://198.18.0.1:" "$work"/cli.*; then
		:
	else
		echo "  the client did not find the server at 198.18.0.1"
		result "two hosts: the server's address is its namespace's" 1
	fi
fi
echo "sockaddr.sh: $pass passed, $fail failed"
[ $fail = 0 ]
