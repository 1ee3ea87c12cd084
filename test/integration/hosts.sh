#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# hosts.sh's owner rule (scripts/hosts.sh): hosts whose owner process has
# gone are taken down by the next "up" that finds them in its way; hosts
# whose owner still runs are never touched, by "up" or by another
# owner's "down"; an "up" told to (HOSTS_WAIT_BUSY) waits for hosts in
# its way to go.  A CI run once failed because a cancelled run had left
# its hosts up: every later test that needed hosts waited 10 minutes and
# failed.  Needs root and network namespaces (else SKIP, exit 77).
set -u
here=$(cd "$(dirname "$0")" && pwd)
hosts="$here/../../scripts/hosts.sh"
export HOSTS_OWNER=$$
a=opxhsa b=opxhsb
tmp=$(mktemp -d /tmp/opx-hosts-test.XXXXXX) || exit 1
owner=
cleanup() {
	[ -n "$owner" ] && kill "$owner" 2>/dev/null
	# our own pid may own neither set: down each as its owner would
	HOSTS_OWNER='' bash "$hosts" down $a >/dev/null 2>&1
	HOSTS_OWNER='' bash "$hosts" down $b >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! bash "$hosts" check >"$tmp/check" 2>&1; then
	echo "SKIP: $(cat "$tmp/check")"
	exit 77
fi

fails=0
ok() { echo "PASS: $*"; }
bad() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# up N PREFIX [OWNER]: hosts.sh up, waiting (at most 10 minutes) while
# another run's hosts hold 198.18.0.0/24, as the other suites do
up() {
	HOSTS_WAIT_BUSY=600 HOSTS_OWNER=${3:-$$} bash "$hosts" up "$1" "$2" >"$tmp/up" 2>&1 && return 0
	cat "$tmp/up"
	return 1
}

# an owner that runs until killed (its own process, not a subshell of ours)
sleep 600 &
owner=$!
if ! up 2 $a "$owner"; then
	echo "FAIL: could not bring up hosts $a"
	exit 1
fi
if grep -q "^opx-hosts owner $owner [0-9]*$" /sys/class/net/${a}br/ifalias; then
	ok "the bridge names its owner ($(cat /sys/class/net/${a}br/ifalias))"
else
	bad "the bridge does not name its owner: '$(cat /sys/class/net/${a}br/ifalias 2>&1)'"
fi

# 1. the owner runs: another up must not take its hosts
if bash "$hosts" up 1 $b >"$tmp/b" 2>&1; then
	bad "up $b succeeded while $a's owner runs"
	bash "$hosts" down $b >/dev/null 2>&1
elif ! grep -q "already in use" "$tmp/b"; then
	bad "up $b failed for another reason: $(cat "$tmp/b")"
fi
if [ -e /run/netns/${a}1 ]; then
	ok "hosts of a live owner are left up by another up"
else
	bad "hosts $a were taken down while their owner runs"
fi

# 2. nor may another owner's down
bash "$hosts" down $a >"$tmp/down" 2>&1
if [ -e /run/netns/${a}1 ] && grep -q "still running: left up" "$tmp/down"; then
	ok "another owner's down leaves them up and says so"
else
	bad "another owner's down took $a down (or said nothing): $(cat "$tmp/down")"
fi

# 3. the owner dies without cleaning up: the next up takes them down
kill "$owner"
wait "$owner" 2>/dev/null
owner=
if up 1 $b; then
	if [ -e /run/netns/${a}1 ] || [ -e /sys/class/net/${a}br ] || grep -q "# opx-hosts $a\$" /etc/hosts; then
		bad "up $b succeeded but left some of $a behind"
	elif ! grep -q "owner .* of hosts $a has gone" "$tmp/up"; then
		bad "up $b took $a down without saying so: $(cat "$tmp/up")"
	else
		ok "hosts of a gone owner are taken down by the next up"
	fi
	bash "$hosts" down $b >/dev/null 2>&1
	if [ -e /run/netns/${b}1 ]; then
		bad "its own owner's down left $b up"
	else
		ok "the owner's own down takes its hosts down"
	fi
else
	bad "up $b failed after $a's owner had gone"
fi

# 4. HOSTS_WAIT_BUSY: an up that finds a live owner's hosts in its way
# waits for them to go, then comes up
sleep 600 &
owner=$!
if up 1 $a "$owner"; then
	HOSTS_WAIT_BUSY=120 bash "$hosts" up 1 $b >"$tmp/w" 2>&1 &
	waiter=$!
	for ((i = 0; i < 600; i++)); do
		grep -q "waiting up to 120 s" "$tmp/w" && break
		kill -0 $waiter 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "already in use.*waiting up to 120 s" "$tmp/w"; then
		bad "up $b with HOSTS_WAIT_BUSY did not wait: $(cat "$tmp/w")"
	elif [ -e /run/netns/${b}1 ]; then
		bad "up $b came up while $a holds the network"
	fi
	HOSTS_OWNER=$owner bash "$hosts" down $a >/dev/null 2>&1
	if wait $waiter && [ -e /run/netns/${b}1 ]; then
		ok "an up with HOSTS_WAIT_BUSY waits for the hosts in its way, then comes up"
	else
		bad "up $b did not come up after $a went down: $(cat "$tmp/w")"
	fi
	bash "$hosts" down $b >/dev/null 2>&1
else
	bad "could not bring up hosts $a again"
fi

echo "hosts.sh: $fails failed"
[ $fails = 0 ]
