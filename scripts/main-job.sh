#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# main-job.sh - from a fresh Debian 12 machine to opx carrying real traffic:
# install the build dependencies, build the provider, then run fi_pingpong
# and a 2-rank Open MPI job over it and print their figures.
#
# Usage: bash scripts/main-job.sh [--deps-only]
#   --deps-only   only install the Debian packages, those the tests need
#                 too (used by test-all.sh)
# Environment:
#   OPX_BUILD     build directory (default <repo>/build)
#   OPX_JOBS      make -j (default: number of cores, at most 4)
#   OPX_NO_APT=1  never call apt-get (dependencies are known to be there)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${OPX_BUILD:-$REPO/build}
JOBS=${OPX_JOBS:-$(nproc)}
[ "$JOBS" -gt 4 ] && JOBS=4

PACKAGES=(libfabric-dev libfabric-bin libibverbs-dev libnuma-dev libsodium-dev libcmocka-dev
	openmpi-bin libopenmpi-dev autoconf automake libtool pkg-config make gcc
	clang iproute2 procps)
# Only the test suite needs these: the Debian package build and its checks,
# and nftables for the tests that drop packets between namespace hosts.
TEST_PACKAGES=(dpkg-dev debhelper fakeroot lintian nftables)

log() { printf '\n==> %s\n' "$*"; }

# Root runs apt-get directly; anyone else needs sudo for it.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "main-job.sh: need root or sudo to run: $*" >&2
		return 1
	fi
}

# install_deps PACKAGE...: apt-get install whichever are missing.
install_deps() {
	local missing=() p
	if [ "${OPX_NO_APT:-0}" = 1 ]; then
		log "skipping apt-get (OPX_NO_APT=1)"
		return 0
	fi
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	# Already complete: skip the network round trip, so reruns and offline
	# machines work.
	if [ ${#missing[@]} -eq 0 ]; then
		log "all Debian packages already installed"
		return 0
	fi
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		"$@"
}

build() {
	log "autoreconf"
	(cd "$REPO" && ./autogen.sh)
	log "configure + make in $BUILD"
	mkdir -p "$BUILD"
	(cd "$BUILD" && "$REPO/configure" && make -j"$JOBS")
}

# wait_server PORT PID LOG: until fi_pingpong (the child of timeout PID)
# listens on its TCP control port PORT - a fact, not a pause, so a busy
# machine only makes it slower; at most 60 s.  Fails if the server exited,
# found the port taken, or never listened.
wait_server() {
	local port=$1 pid=$2 out=$3 i kids
	for ((i = 0; i < 1200; i++)); do
		kids=$(pgrep -P "$pid" | tr '\n' '|')
		if [ -n "$kids" ] && ss -Hltnp "sport = :$port" 2>/dev/null |
		   grep -qE "pid=(${kids%|}),"; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		grep -qi 'address already in use' "$out" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}

# Start "$@ -B port" in the background and "$@ -P port 127.0.0.1" in the
# foreground once the server listens, both bounded; fail if either side
# fails.  The port is random and a server that finds it taken (or never
# listens) is restarted on another one.
run_pingpong() {
	local port spid rc srv_rc
	log "fi_pingpong $* (server + client on 127.0.0.1)"
	for _ in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 30000))
		rc=0 srv_rc=0
		timeout 120 fi_pingpong "$@" -B $port >"$BUILD/pingpong-server.log" 2>&1 &
		spid=$!
		if ! wait_server $port $spid "$BUILD/pingpong-server.log"; then
			kill $spid 2>/dev/null
			wait $spid
			echo "port $port: the server did not listen, trying another"
			continue
		fi
		timeout 120 fi_pingpong "$@" -P $port 127.0.0.1 || rc=$?
		wait $spid || srv_rc=$?
		break
	done
	if [ $rc -ne 0 ] || [ $srv_rc -ne 0 ]; then
		echo "fi_pingpong failed: client rc=$rc server rc=$srv_rc (124 = timeout)"
		echo "--- server output:"
		cat "$BUILD/pingpong-server.log"
		return 1
	fi
}

run_mpi() {
	local src=$REPO/test/mpi/mpi_pingpong.c exe=$BUILD/mpi_pingpong root_opt=()
	if [ ! -e "$src" ]; then
		echo "main-job.sh: $src is missing" >&2
		return 1
	fi
	log "mpicc $src"
	mpicc -O2 -I"$REPO/test/mpi" -o "$exe" "$src"
	[ "$(id -u)" -eq 0 ] && root_opt=(--allow-run-as-root)
	# Debian's openmpi-mca-params.conf says "mtl = ^ofi"; naming the pml
	# and mtl here overrides it so MPI really goes through libfabric.
	log "mpirun -np 2 ... -mca pml cm -mca mtl ofi -x FI_PROVIDER=opx"
	# mtl_ofi_provider_include makes the MTL fail rather than quietly
	# pick another libfabric provider.
	timeout 300 mpirun -np 2 "${root_opt[@]}" --oversubscribe \
		-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include opx \
		-x FI_PROVIDER=opx -x FI_PROVIDER_PATH="$BUILD/.libs" \
		"$exe"
}

main() {
	if [ "${1:-}" = "--deps-only" ]; then
		install_deps "${PACKAGES[@]}" "${TEST_PACKAGES[@]}"
		return 0
	fi
	install_deps "${PACKAGES[@]}"
	build

	export FI_PROVIDER_PATH=$BUILD/.libs
	log "fi_info -p opx -t FI_EP_RDM"
	# Into a file first: head closing the pipe early would trip pipefail.
	fi_info -p opx -t FI_EP_RDM >"$BUILD/fi_info.log"
	head -n 20 "$BUILD/fi_info.log"

	run_pingpong -p opx -e rdm -m tagged -I 1000
	run_mpi
	log "main job done: opx carried fi_pingpong and MPI traffic"
}

main "$@"
