#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# run_mpich_tests.sh - the project's MPI programs under MPICH's ch4 device
# with its OFI netmod (the engine of Intel MPI) on opx, launched by MPICH's
# own mpiexec (hydra).  Needs the build of scripts/mpich-build.sh; without
# it this says SKIP and exits 77 (automake's skip).
#
#  1. selection: one 2-rank job with MPIR_CVAR_DEBUG_SUMMARY=1, the
#     fi_getinfo trace (fi_getinfo_trace.c) and FI_OPX_STATS: MPICH must
#     pick opx and opx must carry the job's messages; prints the capability
#     set MPICH settled on and the hints of its final fi_getinfo.
#  2. one host: every program at each of NPS ranks with MPIR_CVAR_NOLOCAL=1
#     (otherwise MPICH moves on-host traffic through its own shared memory
#     and opx carries nothing), then mpi_osc (native fi_write/fi_read/
#     fi_atomic RMA) and mpi_osc with MPIR_CVAR_CH4_OFI_ENABLE_RMA=0
#     (MPICH's active-message RMA over opx's tagged/multi-recv path),
#     mpi_osc and mpi_large with MPICH's data auto progress (opx's progress
#     thread), mpi_ring, mpi_osc and mpi_large on scalable endpoints, and
#     mpi_large and mpi_flood with opx's SDMA push rendezvous.
#  3. across hosts: 2 namespace hosts (scripts/hosts.sh, root only; SKIP
#     with the reason otherwise), hydra starting its proxies through
#     scripts/opx-rsh: 2 ranks (udp wire only) and 4 ranks (opx's shm and
#     udp peers in one job) with NOLOCAL=1, mpi_busy against the udp peer
#     timeout, and 4 ranks as Intel MPI runs by default (MPICH's shared
#     memory on each host, opx between them).
#
# Every job gets its own FI_OPX_UUID: hydra exports no job id (Intel MPI's
# hydra exports I_MPI_HYDRA_UUID, MPICH's does not), so without one every
# MPICH job of a user would share the job key derived from the uid, and the
# udp wire's secret would be the user's key file alone.
#
# Environment:
#   OPX_MPICH_DIR   MPICH cache (default as scripts/mpich-build.sh)
#   OPX_BUILD_DIR   automake build dir: programs go to $OPX_BUILD_DIR/test/mpich,
#                   opx is loaded from $OPX_BUILD_DIR/.libs
#   FI_PROVIDER_PATH  overrides where libopx-fi.so is looked for
#   NPS="2 4"       rank counts on one host; MPI_TESTS="mpi_ring ..." subset
#   MPICH_HOSTS=0   skip the stage across hosts
#   TEST_TIMEOUT=120  per job (seconds); MPICH_DEADLINE=1500 for the whole
#                   suite: jobs that would start after it are reported as
#                   skipped (and fail the suite), never left running;
#                   the suite takes about 5 minutes on 2 busy cores, plus
#                   up to 10 waiting while another suite holds the
#                   namespace hosts' subnet
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
mpich=${OPX_MPICH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opx-mpich}/install
nps=${NPS:-"2 4"}
tests=${MPI_TESTS:-"mpi_ring mpi_wildcard mpi_probe mpi_manyreq mpi_coll mpi_threads mpi_pingpong mpi_large mpi_flood mpi_busy"}
tmo=${TEST_TIMEOUT:-120}
deadline=$((SECONDS + ${MPICH_DEADLINE:-1500}))

if [ ! -x "$mpich/bin/mpicc" ] || [ ! -x "$mpich/bin/mpiexec" ] ||
   [ ! -f "$mpich/.opx-stamp" ]; then
	echo "SKIP: no MPICH ch4:ofi build in $mpich (run scripts/mpich-build.sh)"
	exit 77
fi
: "${FI_PROVIDER_PATH:=${OPX_BUILD_DIR:-}/.libs}"
if [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
	echo "FAIL: $FI_PROVIDER_PATH/libopx-fi.so not found (set OPX_BUILD_DIR or FI_PROVIDER_PATH)"
	exit 1
fi
FI_PROVIDER_PATH=$(cd "$FI_PROVIDER_PATH" && pwd)

if [ -n "${OPX_BUILD_DIR:-}" ]; then
	bindir=$OPX_BUILD_DIR/test/mpich
	mkdir -p "$bindir" || exit 1
else
	bindir=$(mktemp -d /tmp/opx-mpich-tests.XXXXXX) || exit 1
	trap 'rm -rf "$bindir"' EXIT
fi
cd "$bindir" || exit 1

echo "# MPICH $("$mpich/bin/mpichversion" | sed -n 's/^MPICH Version:[[:space:]]*//p')" \
	"$("$mpich/bin/mpichversion" | sed -n 's/^MPICH Device:[[:space:]]*//p'), programs in $bindir"
# GCC 12 takes MPICH 4.0's MPI_STATUSES_IGNORE ((MPI_Status *)1) for an
# array of size 0 and warns at every MPI_Waitall (-Wstringop-overflow);
# MPICH 4.1's headers avoid it.  Everything else stays -Werror.
cflags=(-O2 -Wall -Wextra -Werror -Wno-stringop-overflow -pthread)
# mpi_ring serves the selection check whatever MPI_TESTS says
# shellcheck disable=SC2086 # $tests is a list of words
for t in $(printf '%s\n' mpi_ring $tests mpi_osc | sort -u); do
	if ! "$mpich/bin/mpicc" "${cflags[@]}" -o "$t" "$here/$t.c" >"$t.build.log" 2>&1; then
		cat "$t.build.log"
		echo "FAIL: cannot build $t with MPICH's mpicc"
		exit 1
	fi
done
if ! gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -shared -fPIC \
     -o fi_getinfo_trace.so "$here/fi_getinfo_trace.c" -lfabric -ldl; then
	echo "FAIL: cannot build fi_getinfo_trace.so"
	exit 1
fi

pass=0 fail=0
failed=""
# want PROGRAM: is it one of the programs asked for (MPI_TESTS)?
want() { [[ " $tests mpi_osc " == *" $1 "* ]]; }
# mpi_pingpong's table, indented under its result line
show_pingpong() { grep -E '^ +[0-9]+ ' "$1" | sed 's/^/     /'; }
# Every job: opx only, from this build, warnings into the log.
base=(-genv FI_PROVIDER opx -genv FI_PROVIDER_PATH "$FI_PROVIDER_PATH"
      -genv FI_LOG_LEVEL "${FI_LOG_LEVEL:-warn}")

ok() { pass=$((pass + 1)); echo "ok   $1 (${2}s)"; }
bad() { # name why log
	fail=$((fail + 1))
	failed="$failed [$1]"
	echo "FAIL $1 ($2); log: $3"
	# the program's own FAIL, MPICH's error stack, opx's warnings (not
	# libfabric core's about the providers FI_PROVIDER filtered out)
	local pat='FAIL|alarm|Assertion|Fatal error|Segmentation|^[A-Za-z_]+\([0-9]+\)\.*:|^libfabric:[0-9]+:[0-9]+:[^:]*:opx:.*<warn>'
	if grep -qE "$pat" "$3"; then
		grep -E "$pat" "$3" | head -n 12
	else
		grep -v '^[- ]*$' "$3" | tail -n 8
	fi | sed 's/^/     /'
}

# job NAME LOG NP MPIEXEC-ARGS... -- PROGRAM ARGS...: one bounded mpiexec;
# passes when it exits 0 and the program printed its PASS line.
job() {
	local name=$1 log=$2 np=$3 start rc secs prog
	shift 3
	if [ $SECONDS -ge $deadline ]; then
		bad "$name" "not run: MPICH_DEADLINE reached" /dev/null
		return 1
	fi
	local margs=()
	while [ "$1" != -- ]; do margs+=("$1"); shift; done
	shift
	prog=$(basename "$1")
	start=$SECONDS
	timeout -k 10 "$tmo" "$mpich/bin/mpiexec" -n "$np" "${base[@]}" \
		-genv FI_OPX_UUID "$(cat /proc/sys/kernel/random/uuid)" "${margs[@]}" \
		"$@" >"$log" 2>&1
	rc=$?
	secs=$((SECONDS - start))
	if [ $rc = 0 ] && grep -q "^PASS $prog" "$log"; then
		ok "$name" $secs
		return 0
	fi
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		bad "$name" "timeout after ${tmo}s" "$log"
	else
		bad "$name" "exit $rc, ${secs}s" "$log"
	fi
	return 1
}

# ---- 1. what MPICH asks for and what it picked ----------------------------
log=$bindir/selection.log
# The trace goes after whatever LD_PRELOAD holds: test-all.sh's ASan stage
# preloads the sanitizer runtime, which must stay first.
if job "selection: MPICH picks opx, opx carries the job" "$log" 2 \
	-genv MPIR_CVAR_NOLOCAL 1 -genv MPIR_CVAR_DEBUG_SUMMARY 1 \
	-genv LD_PRELOAD "${LD_PRELOAD:+$LD_PRELOAD }$bindir/fi_getinfo_trace.so" \
	-genv FI_OPX_STATS stderr \
	-- ./mpi_ring; then
	why=""
	grep -q '^libfabric provider: opx' "$log" || why="MPICH did not report provider opx"
	# FI_OPX_STATS=stderr: one table per endpoint, "eager N ..." sent
	[ "$(grep -cE '^ *eager +[1-9]' "$log")" -ge 2 ] || why="${why:+$why; }opx stats show no eager traffic on 2 endpoints"
	if [ -n "$why" ]; then
		pass=$((pass - 1))
		bad "selection checks" "$why" "$log"
	fi
	grep -E '^provider: |^MPIDI_OFI_ENABLE_(AV_TABLE|SCALABLE|SHARED|TAGGED|AM|RMA|ATOMICS|MR_)|^max_(buffered_send|msg_size)' \
		"$log" | sed 's/^/     /'
	# the hints of MPICH's last fi_getinfo (the one that opens the fabric)
	last=$(grep -oE '^fi_getinfo #[0-9]+ from libmpi' "$log" | tail -n 1 | grep -oE '#[0-9]+')
	# (fields left empty, zero or unspecified are not shown)
	[ -n "$last" ] && echo "     hints of MPICH's fi_getinfo $last:" &&
		awk -v h="fi_getinfo $last hints:" '$0 == h {p = 1; next} p && /^fi_getinfo/ {exit} p' "$log" |
		grep -vE ': (\[  \]|0|0x0|0\.0|\(null\)|\(nil\)|FI_[A-Z_]*UNSPEC)$|^fi_info:' |
		sed 's/^/     /'
fi

# ---- 2. one host ---------------------------------------------------------------
echo "# one host, MPIR_CVAR_NOLOCAL=1, ranks: $nps"
for np in $nps; do
	for t in $tests; do
		targs=()
		[ "$t" = mpi_pingpong ] && targs=(-q)
		job "$t np=$np" "$bindir/$t.np$np.log" "$np" -genv MPIR_CVAR_NOLOCAL 1 -- \
			"./$t" "${targs[@]}" && [ "$t" = mpi_pingpong ] && [ "$np" = 2 ] &&
			show_pingpong "$bindir/$t.np$np.log"
	done
	job "mpi_osc np=$np native RMA" "$bindir/mpi_osc.np$np.log" "$np" \
		-genv MPIR_CVAR_NOLOCAL 1 -- ./mpi_osc
done
job "mpi_osc np=2 active-message RMA (MPIR_CVAR_CH4_OFI_ENABLE_RMA=0)" \
	"$bindir/mpi_osc.am.log" 2 -genv MPIR_CVAR_NOLOCAL 1 \
	-genv MPIR_CVAR_CH4_OFI_ENABLE_RMA 0 -- ./mpi_osc
# MPICH asking for data auto progress: opx's second fi_getinfo entry, a
# progress thread per domain (opx_auto.c)
for t in mpi_osc mpi_large; do
	want "$t" || continue
	job "$t np=2 auto progress (MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS=1)" \
		"$bindir/$t.auto.log" 2 -genv MPIR_CVAR_NOLOCAL 1 \
		-genv MPIR_CVAR_CH4_OFI_ENABLE_DATA_AUTO_PROGRESS 1 -- "./$t"
done
# MPICH on scalable endpoints (its contexts from fi_tx_context and
# fi_rx_context, peers named with fi_rx_addr)
for t in mpi_ring mpi_osc mpi_large; do
	want "$t" || continue
	job "$t np=2 scalable endpoints (MPIR_CVAR_CH4_OFI_ENABLE_SCALABLE_ENDPOINTS=1)" \
		"$bindir/$t.sep.log" 2 -genv MPIR_CVAR_NOLOCAL 1 \
		-genv MPIR_CVAR_CH4_OFI_ENABLE_SCALABLE_ENDPOINTS 1 -- "./$t"
done
# opx's other rendezvous path: SDMA push into the receiver's TID table
for t in mpi_large mpi_flood; do
	want "$t" || continue
	job "$t np=2 rendezvous push (FI_OPX_RNDV_CMA=0)" "$bindir/$t.push.log" 2 \
		-genv MPIR_CVAR_NOLOCAL 1 -genv FI_OPX_RNDV_CMA 0 -- "./$t"
done

# ---- 3. across hosts -------------------------------------------------------------
hosts=$top/scripts/hosts.sh
# this run owns the hosts it brings up (hosts.sh: owner)
export HOSTS_OWNER=$$
prefix=opxm
# 198.18.0.0/24 holds one set of hosts at a time: while another suite's
# hosts are up, hosts.sh waits for them to go (at most 10 minutes, and
# not past this suite's deadline)
hosts_up() {
	local out wait=$((deadline - SECONDS))
	[ $wait -gt 600 ] && wait=600
	[ $wait -lt 0 ] && wait=0
	if out=$(HOSTS_WAIT_BUSY=$wait bash "$hosts" up 2 $prefix 2>&1); then
		grep "waiting up to" <<<"$out" | sed 's/^/# /'
		return 0
	fi
	echo "$out"
	return 1
}
if [ "${MPICH_HOSTS:-1}" = 0 ]; then
	echo "# across hosts: skipped (MPICH_HOSTS=0)"
elif ! why=$(bash "$hosts" check 2>&1); then
	echo "# across hosts: SKIP: $why"
elif ! hosts_up; then
	bad "create 2 namespace hosts" "hosts.sh up failed" /dev/null
else
	trap 'bash "$hosts" down $prefix >/dev/null 2>&1; [ -z "${OPX_BUILD_DIR:-}" ] && rm -rf "$bindir"' EXIT
	# hydra's ssh launcher runs "opx-rsh HOST proxy-command" for each
	# host; the proxies call back to mpiexec at the bridge's address
	# (-iface), the one address of this namespace they can reach.
	xargs=(-launcher ssh -launcher-exec "$top/scripts/opx-rsh" -iface "${prefix}br"
	       -hosts "${prefix}1,${prefix}2")
	# a minute of peer timeout: 4 ranks on 2 busy cores can leave a
	# peer unscheduled longer than the default 10 s (see udp.sh)
	nolocal=(-genv MPIR_CVAR_NOLOCAL 1 -genv FI_OPX_PEER_TIMEOUT 60)
	echo "# across 2 namespace hosts (${prefix}1, ${prefix}2), MPIR_CVAR_NOLOCAL=1"
	for np in 2 4; do
		for t in mpi_ring mpi_pingpong mpi_large mpi_coll mpi_wildcard mpi_osc; do
			want "$t" || continue
			targs=()
			[ "$t" = mpi_pingpong ] && targs=(-q)
			job "$t np=$np across 2 hosts" "$bindir/$t.hosts.np$np.log" "$np" \
				"${xargs[@]}" "${nolocal[@]}" -genv OPX_MPI_LARGE_MAX_MB 64 -- \
				"$bindir/$t" "${targs[@]}" &&
				[ "$t" = mpi_pingpong ] && [ "$np" = 2 ] &&
				show_pingpong "$bindir/$t.hosts.np$np.log"
		done
	done
	# receivers compute for 30 s without an MPI call, 1.5 peer timeouts,
	# while their partners' messages wait unacknowledged: opx's watchdog
	# keeps them alive (a timeout of 20 s: on a loaded machine a process
	# group may wait 12 s for a core, see udp.sh)
	want mpi_busy &&
	job "mpi_busy np=4 across 2 hosts, busy 1.5 peer timeouts" "$bindir/mpi_busy.hosts.log" 4 \
		"${xargs[@]}" -genv MPIR_CVAR_NOLOCAL 1 -genv FI_OPX_PEER_TIMEOUT 20 \
		-genv OPX_MPI_BUSY_S 30 -- "$bindir/mpi_busy"
	# as Intel MPI runs by default: MPICH's shared memory between the two
	# ranks of a host, opx (udp wire) between the hosts
	for t in mpi_ring mpi_large mpi_osc; do
		want "$t" || continue
		job "$t np=4 across 2 hosts, MPICH shm on each host" "$bindir/$t.hosts.shm.log" 4 \
			"${xargs[@]}" -genv FI_OPX_PEER_TIMEOUT 60 -genv OPX_MPI_LARGE_MAX_MB 16 \
			-- "$bindir/$t"
	done
	bash "$hosts" down $prefix >/dev/null 2>&1
fi

[ -n "$failed" ] && echo "# failed:$failed"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
