#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# hosts.sh - simulate hosts with Linux network namespaces (needs root).
#
#   hosts.sh check                 exit 0 if namespaces, veth and bridges work
#                                  here, else print why and exit 77 (skip)
#   hosts.sh up N [PREFIX]         namespaces PREFIX1..PREFIXN (PREFIX: opxh),
#                                  host i at 198.18.0.i/24 on its eth0, joined
#                                  by the bridge PREFIXbr in the root namespace
#                                  at 198.18.0.254/24 (so mpirun there reaches
#                                  the orteds); every link at MTU $HOSTS_MTU
#                                  (9000; 1500 for a standard path).  Adds
#                                  "198.18.0.i PREFIXi # opx-hosts PREFIX" to
#                                  /etc/hosts, waits up to $HOSTS_WAIT (5) s
#                                  until each host pings every other and the
#                                  bridge with a full-MTU unfragmented packet,
#                                  prints "PREFIXi 198.18.0.i" per host.
#                                  While other hosts hold 198.18.0.0/24 (or
#                                  PREFIX is up) it fails at once, or waits
#                                  up to $HOSTS_WAIT_BUSY s for them to go.
#   hosts.sh down [PREFIX]         remove all of it; never fails
#   hosts.sh run NAME cmd...       run cmd in namespace NAME with the host
#                                  name NAME (own UTS namespace, like opx-rsh;
#                                  environment kept)
#   hosts.sh drop HOST PERCENT [all]
#                                  drop PERCENT % of the UDP packets arriving
#                                  in namespace HOST (nftables; "all": every
#                                  IP packet, TCP's too, so that tcp can be
#                                  measured under the same loss); 0 removes
#                                  it (without nft there is none: done);
#                                  exit 77 without nft otherwise
#   hosts.sh mpirun-args [PREFIX]  the Open MPI arguments that start one
#                                  orted per namespace through scripts/opx-rsh:
#     mpirun --allow-run-as-root $(scripts/hosts.sh mpirun-args) -np 2 ./a.out
#     ($HOSTS_SLOTS, if set, is appended to each host as opxh1:SLOTS.)
#
# State lives in ${TMPDIR:-/tmp}/opx-hosts-PREFIX/: "hosts" (name address),
# "etc-hosts" (the /etc/hosts lines), "n" and "mtu".  Only one PREFIX can be
# up at a time: they would all claim 198.18.0.0/24 in the root namespace.
#
# Owner: a caller that sets HOSTS_OWNER=PID (a test sets its own $$) has
# "up" write that process and its start time into the bridge's alias.
# Hosts whose owner has gone (killed without its cleanup: a cancelled CI
# run, a kill -9) are taken down by the next "up" that finds them in its
# way, instead of holding 198.18.0.0/24 for every later run; hosts without
# an owner, or whose owner still runs, are never touched.  "down" with
# HOSTS_OWNER set leaves alone hosts another live process owns.
set -euo pipefail

NET=198.18.0
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "hosts.sh: $*" >&2; exit 1; }
skip() { echo "hosts.sh: $*" >&2; exit 77; }

# PREFIX makes the names: ${P}1.., ${P}br, ${P}v<i>; interface names are
# limited to 15 characters, so keep it short.
set_prefix() {
	P=${1:-opxh}
	[[ $P =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "bad prefix '$P' (a-z0-9, at most 10, letter first)"
	STATE=${TMPDIR:-/tmp}/opx-hosts-$P
	BR=${P}br
	MARK="# opx-hosts $P"
}

is_ns() { [ -e "/run/netns/$1" ]; }

# start time of process PID (field 22 of /proc/PID/stat, after the
# command name, which may hold spaces and parentheses); fails if none
start_time() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	# shellcheck disable=SC2086 # split into fields on purpose
	set -- $s
	[ -n "${20:-}" ] && echo "${20}"
}

# the alias "up" gives the bridge: "opx-hosts owner PID STARTTIME"
owner_tag() {
	local t
	[[ ${HOSTS_OWNER:-} =~ ^[0-9]+$ ]] || return 1
	t=$(start_time "$HOSTS_OWNER") || return 1
	echo "opx-hosts owner $HOSTS_OWNER $t"
}

# owner_state BRIDGE: "none" (no owner recorded), "live PID" or "gone PID"
owner_state() {
	local a pid t
	a=$(cat "/sys/class/net/$1/ifalias" 2>/dev/null) || a=
	if ! [[ $a =~ ^opx-hosts\ owner\ ([0-9]+)\ ([0-9]+)$ ]]; then
		echo none
		return
	fi
	pid=${BASH_REMATCH[1]}
	t=$(start_time "$pid") || t=
	if [ "$t" = "${BASH_REMATCH[2]}" ]; then
		echo "live $pid"
	else
		echo "gone $pid"
	fi
}

# Take down every set of hosts in the way of prefix $P whose owner has
# gone: the holder of 198.18.0.0/24 in the root namespace, and $P itself.
reclaim_gone() {
	local dev st p mine=$P
	for dev in $(ip -4 -o addr show to "$NET.0/24" 2>/dev/null | awk '{print $2}' | sort -u) "$BR"; do
		[[ $dev =~ ^([a-z][a-z0-9]{0,9})br$ ]] || continue
		p=${BASH_REMATCH[1]}
		[ -e "/sys/class/net/$dev" ] || continue
		st=$(owner_state "$dev")
		[ "${st%% *}" = gone ] || continue
		echo "hosts.sh: the owner (pid ${st#* }) of hosts $p has gone: taking them down" >&2
		set_prefix "$p"
		do_down
		set -e
	done
	set_prefix "$mine"
}

# /etc/hosts is rewritten in place (it may be a bind mount).
etc_hosts_drop() {
	local keep
	[ -w /etc/hosts ] || return 0
	grep -qF " $MARK" /etc/hosts || return 0
	keep=$(grep -vxE ".* $MARK" /etc/hosts || true)
	printf '%s\n' "$keep" >/etc/hosts
}

do_check() {
	local ns=opxchk$$ why=
	[ "$(id -u)" -eq 0 ] || skip "not root: network namespaces need root"
	command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
	ip netns add "$ns" 2>/dev/null || skip "'ip netns add' fails here (no CAP_SYS_ADMIN or no netns support)"
	if ! ip -n "$ns" link add opxa type veth peer name opxb 2>/dev/null; then
		why="cannot create veth pairs"
	elif ! ip -n "$ns" link add opxbr type bridge 2>/dev/null; then
		why="cannot create bridges"
	elif ! ip -n "$ns" link set opxa mtu 9000 2>/dev/null; then
		why="cannot set MTU 9000 on veth"
	elif ! ip netns exec "$ns" unshare --uts sh -c 'echo x >/proc/sys/kernel/hostname' 2>/dev/null; then
		why="cannot set a host name in a new UTS namespace (unshare --uts)"
	elif ! : >>/etc/hosts 2>/dev/null; then
		why="/etc/hosts is not writable"
	fi
	ip netns del "$ns" 2>/dev/null || true
	[ -z "$why" ] || skip "$why"
}

do_down() {
	set +e
	local ns st
	if [ -n "${HOSTS_OWNER:-}" ] && [ -e "/sys/class/net/$BR" ]; then
		st=$(owner_state "$BR")
		if [ "${st%% *}" = live ] && [ "${st#* }" != "$HOSTS_OWNER" ]; then
			echo "hosts.sh: hosts $P belong to pid ${st#* }, still running: left up" >&2
			return 0
		fi
	fi
	# namespaces ${P}0.. (deleting one deletes its veth pair too)
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -xE "${P}[0-9]+"); do
		ip netns del "$ns" 2>/dev/null
	done
	for ns in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -xE "${P}v[0-9]+"); do
		ip link del "$ns" 2>/dev/null
	done
	ip link del "$BR" 2>/dev/null
	etc_hosts_drop
	rm -rf "$STATE"
	return 0
}

# Every host pings every other one and the bridge once, with a packet of
# the full MTU that must not fragment; give up after $HOSTS_WAIT seconds.
wait_ping() {
	local n=$1 mtu=$2 i j end pending next
	if ! command -v ping >/dev/null; then
		echo "hosts.sh: no ping here; connectivity not checked" >&2
		return 0
	fi
	end=$((SECONDS + ${HOSTS_WAIT:-5}))
	pending=()
	for ((i = 1; i <= n; i++)); do
		for j in $(seq 1 "$n") 254; do
			[ "$i" = "$j" ] || pending+=("$i:$j")
		done
	done
	while [ ${#pending[@]} -gt 0 ]; do
		next=()
		for i in "${pending[@]}"; do
			if [ $SECONDS -ge "$end" ] ||
				! ip netns exec "$P${i%:*}" ping -c1 -W1 -q -M "do" -s $((mtu - 28)) \
					"$NET.${i#*:}" >/dev/null 2>&1; then
				next+=("$i")
			fi
		done
		pending=("${next[@]+"${next[@]}"}")
		[ ${#pending[@]} -eq 0 ] && break
		[ $SECONDS -lt "$end" ] || die "no ping (host:address) ${pending[*]} within ${HOSTS_WAIT:-5} s"
		sleep 0.2
	done
}

up_failed() {
	local rc=$?
	[ "$rc" -eq 0 ] && return
	echo "hosts.sh: up failed, cleaning up" >&2
	do_down
	exit "$rc"
}

# Until nothing holds what prefix $P needs (hosts of a gone owner are
# taken down), or $HOSTS_WAIT_BUSY seconds (0: fail at once) have passed.
wait_free() {
	local limit=${HOSTS_WAIT_BUSY:-0} start=$SECONDS why said=''
	[[ $limit =~ ^[0-9]+$ ]] || die "bad HOSTS_WAIT_BUSY '$limit'"
	while :; do
		reclaim_gone
		if [ -e "$STATE" ] || is_ns "${P}1" || ip link show "$BR" >/dev/null 2>&1; then
			why="prefix $P is already up (hosts.sh down $P)"
		elif [ -n "$(ip -4 -o addr show to "$NET.0/24")" ]; then
			why="$NET.0/24 is already in use in the root namespace (another prefix up?)"
		else
			return 0
		fi
		[ $((SECONDS - start)) -lt "$limit" ] || die "$why"
		[ -n "$said" ] || echo "hosts.sh: $why: waiting up to $limit s for it to go" >&2
		said=1
		sleep 2
	done
}

do_up() {
	local n=$1 mtu=${HOSTS_MTU:-9000} i ns tag
	if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 253 ]; then
		die "N must be 1..253"
	fi
	if ! [[ $mtu =~ ^[0-9]+$ ]] || [ "$mtu" -lt 1280 ]; then
		die "bad HOSTS_MTU '$mtu'"
	fi
	do_check
	wait_free

	trap up_failed EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$STATE"
	ip link add "$BR" type bridge
	tag=$(owner_tag) && ip link set "$BR" alias "$tag"
	ip link set "$BR" mtu "$mtu"
	ip addr add "$NET.254/24" dev "$BR"
	ip link set "$BR" up
	: >"$STATE/hosts"
	: >"$STATE/etc-hosts"
	for ((i = 1; i <= n; i++)); do
		ns=$P$i
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		ip link add "${P}v$i" mtu "$mtu" type veth peer name "${P}p$i" mtu "$mtu"
		ip link set "${P}p$i" netns "$ns"
		ip -n "$ns" link set "${P}p$i" name eth0
		ip -n "$ns" addr add "$NET.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip link set "${P}v$i" master "$BR" up
		echo "$ns $NET.$i" >>"$STATE/hosts"
		echo "$NET.$i $ns $MARK" >>"$STATE/etc-hosts"
	done
	ip link set "$BR" mtu "$mtu" # a bridge follows its smallest port
	echo "$n" >"$STATE/n"
	echo "$mtu" >"$STATE/mtu"
	etc_hosts_drop
	[ -z "$(tail -c1 /etc/hosts)" ] || echo >>/etc/hosts
	cat "$STATE/etc-hosts" >>/etc/hosts
	wait_ping "$n" "$mtu"
	trap - EXIT INT TERM
	cat "$STATE/hosts"
}

do_drop() {
	local host=$1 pct=$2 what=(meta l4proto udp)
	[ "${3:-udp}" = all ] && what=(meta nfproto ipv4)
	if ! [[ $pct =~ ^[0-9]+$ ]] || [ "$pct" -gt 100 ]; then
		die "PERCENT must be 0..100"
	fi
	is_ns "$host" || die "no namespace '$host'"
	if ! command -v nft >/dev/null; then
		# no nftables, no rule of ours: loss-free is what there is
		[ "$pct" -eq 0 ] && return 0
		skip "no 'nft' command (nftables); cannot drop packets"
	fi
	ip netns exec "$host" nft delete table inet opxloss 2>/dev/null || true
	[ "$pct" -eq 0 ] && return 0
	ip netns exec "$host" nft add table inet opxloss
	ip netns exec "$host" nft add chain inet opxloss in '{ type filter hook input priority 0; }'
	ip netns exec "$host" nft add rule inet opxloss in "${what[@]}" numgen random mod 100 '<' "$pct" drop
}

do_mpirun_args() {
	local n i hosts=
	[ -r "$STATE/n" ] || die "prefix $P is not up (hosts.sh up N $P)"
	n=$(cat "$STATE/n")
	for ((i = 1; i <= n; i++)); do
		hosts+=${hosts:+,}$P$i${HOSTS_SLOTS:+:$HOSTS_SLOTS}
	done
	echo "--mca plm_rsh_agent $SELF/opx-rsh --mca plm_rsh_no_tree_spawn 1" \
		"--mca oob_tcp_if_include $NET.0/24 --mca btl_tcp_if_include $NET.0/24 --host $hosts"
}

usage() { sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
check) do_check ;;
up) [ $# -ge 1 ] || usage; set_prefix "${2:-}"; do_up "$1" ;;
down) set_prefix "${1:-}"; do_down ;;
run) [ $# -ge 2 ] || usage; is_ns "$1" || die "no namespace '$1'"
	ns=$1; shift
	# shellcheck disable=SC2016 # $0 and $@ expand in the inner shell
	exec ip netns exec "$ns" unshare --uts sh -c \
		'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$ns" "$@" ;;
drop) [ $# -eq 2 ] || [ $# -eq 3 ] || usage; do_drop "$@" ;;
mpirun-args) set_prefix "${1:-}"; do_mpirun_args ;;
*) usage ;;
esac
