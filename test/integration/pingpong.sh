#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# pingpong.sh - fi_pingpong with data check over the opx provider, at every
# protocol threshold and one byte either side of it.
#
# Thresholds: inline payload 16 B, 4 KiB, packet MTU 8 KiB and 16 KiB; off-by-
# one errors in packetisation show up exactly there, so each is swept as
# N-1, N, N+1.  Both tagged and untagged (msg) paths are run, with -c so
# the payload is verified, not just delivered.
#
# Environment:
#   PROV              provider under test (default opx; PROV=shm checks the
#                     script itself against libfabric's shm provider)
#   FI_PROVIDER_PATH  where libopx-fi.so is (default $OPX_BUILD_DIR/.libs,
#                     or ./.libs when OPX_BUILD_DIR is not set either)
#   PINGPONG_PORT     first TCP control port (default: random in 20000..49999);
#                     each run uses its own port so a lingering socket cannot
#                     break the next, and a port some other program holds is
#                     skipped (the run is retried on the next port)
#   PINGPONG_ITERS    iterations per run (default 10)
#   PINGPONG_SIZES    override the size list
set -u

PROV=${PROV:-opx}
PORT=${PINGPONG_PORT:-$((20000 + RANDOM % 30000))}
TRIES=5
ITERS=${PINGPONG_ITERS:-10}
SIZES=${PINGPONG_SIZES:-"1 2 15 16 17 64 1000 4095 4096 4097 8191 8192 8193 16383 16384 16385"}
MODES="tagged msg"
TMO=30

if ! command -v fi_pingpong >/dev/null 2>&1; then
	echo "pingpong.sh: fi_pingpong not found (Debian package libfabric-bin)" >&2
	exit 1
fi

if [ "$PROV" = opx ]; then
	# "make check" sets both; by hand, running from the build directory
	# is enough.
	if [ -z "${FI_PROVIDER_PATH:-}" ]; then
		FI_PROVIDER_PATH=${OPX_BUILD_DIR:-.}/.libs
	fi
	export FI_PROVIDER_PATH
	if [[ $FI_PROVIDER_PATH != *:* ]] && [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
		echo "pingpong.sh: no libopx-fi.so in FI_PROVIDER_PATH=$FI_PROVIDER_PATH" >&2
		exit 1
	fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/opx-pingpong.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Wait (at most ~60 s) until *our* server listens on its control port, so
# the client never races the server's startup nor talks to another program
# that happens to hold the port. Returns 2 when the port is taken by
# someone else (the caller moves to another port). Without ss, fall back
# to a pause.
wait_listen() {
	local port=$1 pid=$2 out=$3 i kids
	if ! command -v ss >/dev/null 2>&1; then
		sleep 1
		return 0
	fi
	for ((i = 0; i < 1200; i++)); do
		# $pid is timeout(1); fi_pingpong is its child.
		# not under the ASan runtime the sanitizer build preloads:
		# pgrep deadlocks in it
		kids=$(env -u LD_PRELOAD pgrep -P "$pid" | tr '\n' '|')
		if [ -n "$kids" ] &&
		   env -u LD_PRELOAD ss -Hltnp "sport = :$port" 2>/dev/null |
		   grep -qE "pid=(${kids%|}),"; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null ||
		   grep -qi 'address already in use' "$out" 2>/dev/null; then
			grep -qi 'in use' "$out" 2>/dev/null && return 2
			return 1
		fi
		sleep 0.05
	done
	ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 2
	return 1
}

pass=0
fail=0
failed_runs=""

for mode in $MODES; do
	for size in $SIZES; do
		name="$PROV $mode size=$size"
		srv_out=$tmp/srv.$mode.$size
		cli_out=$tmp/cli.$mode.$size
		args=(-p "$PROV" -e rdm -m "$mode" -c -S "$size" -I "$ITERS")

		for ((try = 1; try <= TRIES; try++)); do
			timeout $TMO fi_pingpong "${args[@]}" -B "$PORT" >"$srv_out" 2>&1 &
			srv_pid=$!
			wait_listen "$PORT" "$srv_pid" "$srv_out"
			listen_rc=$?
			if [ $listen_rc = 0 ]; then
				timeout $TMO fi_pingpong "${args[@]}" -P "$PORT" 127.0.0.1 >"$cli_out" 2>&1
				cli_rc=$?
			else
				echo "server did not start listening on port $PORT" >"$cli_out"
				cli_rc=1
				kill "$srv_pid" 2>/dev/null
			fi
			wait "$srv_pid"
			srv_rc=$?
			PORT=$((PORT + 1))
			[ $PORT -gt 60000 ] && PORT=20000
			# Port held by another program: same run on the next port.
			[ $listen_rc = 2 ] || break
			echo "note: $name: port $((PORT - 1)) in use, retrying on $PORT"
		done

		if [ $cli_rc -eq 0 ] && [ $srv_rc -eq 0 ]; then
			pass=$((pass + 1))
			# The figures line: bytes #sent #ack total time MB/s usec/xfer Mxfers/s
			echo "PASS: $name  $(grep -v '^bytes' "$cli_out" | tail -n 1)"
		else
			fail=$((fail + 1))
			failed_runs="$failed_runs
  $name (client rc=$cli_rc, server rc=$srv_rc; 124 = timeout)"
			echo "FAIL: $name (client rc=$cli_rc, server rc=$srv_rc)"
			echo "--- server output:"
			tail -n 20 "$srv_out"
			echo "--- client output:"
			tail -n 20 "$cli_out"
		fi
	done
done

if [ $fail -ne 0 ]; then
	echo "failed runs:$failed_runs"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
