#!/bin/bash
# Build and run the opx MPI integration tests.
#
# Usage: bash test/mpi/run_mpi_tests.sh
# Environment:
#   PROV=opx|shm|tcp   libfabric provider for pml cm + mtl ofi (default opx)
#   MPI_MODE=ob1       use Open MPI's own ob1/vader path instead (no libfabric)
#   OPX_BUILD_DIR      automake build dir; programs go to $OPX_BUILD_DIR/test/mpi
#                      and opx is loaded from $OPX_BUILD_DIR/.libs
#   FI_PROVIDER_PATH   overrides where libopx-fi.so is looked for
#   FI_LOG_LEVEL       passed through to the ranks
#   NPS="2 3 4"        rank counts to run;  MPI_TESTS="mpi_ring ..." subset
#                      (not TESTS: "make check TESTS=..." exports that one)
#   RNDV_MODES="cma push"  opx rendezvous paths: cma = default single-copy
#                      pull, push = -x FI_OPX_RNDV_CMA=0 (SDMA/TID push).
#                      The first mode runs every test; later modes run only
#                      RNDV_TESTS (default "mpi_large mpi_flood", "all" for
#                      every test) to bound the runtime.  opx only.
#   OPX_MPI_FLOOD_DEPTH/_KB/_ROUNDS, OPX_MPI_LARGE_MAX_MB  passed through
#                      to scale mpi_flood / mpi_large down; OPX_MPI_BUSY_S
#                      how long mpi_busy's receivers compute (2)
#   OSC_TESTS=0        skip mpi_osc (MPI one-sided over osc rdma / btl ofi, opx only)
#   STRICT=1           count known provider bugs (see XFAIL below) as failures
#   TEST_TIMEOUT=300   per-run timeout in seconds
#   MPI_EXTRA_ARGS     more mpirun arguments (hosts, agents: see udp.sh)
set -u

here=$(cd "$(dirname "$0")" && pwd)
prov=${PROV:-opx}
mode=${MPI_MODE:-cm}
nps=${NPS:-"2 3 4"}
tests=${MPI_TESTS:-"mpi_ring mpi_wildcard mpi_probe mpi_manyreq mpi_coll mpi_threads mpi_pingpong mpi_large mpi_flood mpi_busy"}
modes=${RNDV_MODES:-"cma push"}
rndv_tests=${RNDV_TESTS:-"mpi_large mpi_flood"}
tmo=${TEST_TIMEOUT:-300}

if [ -n "${OPX_BUILD_DIR:-}" ]; then
	bindir=$OPX_BUILD_DIR/test/mpi
	mkdir -p "$bindir" || exit 1
else
	bindir=$(mktemp -d /tmp/opx-mpi-tests.XXXXXX) || exit 1
	trap 'rm -rf "$bindir"' EXIT
fi

echo "# building MPI tests into $bindir"
for t in $tests; do
	if ! mpicc -O2 -Wall -Wextra -Werror -pthread -o "$bindir/$t" "$here/$t.c"; then
		echo "FAIL: cannot build $t"
		exit 1
	fi
done

args=(--oversubscribe)
[ "$(id -u)" = 0 ] && args+=(--allow-run-as-root)
# Known bugs of libfabric 1.17's own providers (not of the tests): the
# tests are validated with MPI_MODE=ob1 and PROV=tcp.  shm hangs in
# MPI_Recv after MPI_Probe (FI_PEEK path) and delivers messages of
# different protocols out of order (MPI non-overtaking violated).
xfail=""
if [ "$mode" = ob1 ]; then
	args+=(-mca pml ob1 -mca btl self,vader)
	label="ob1/vader"
else
	# Debian's openmpi-mca-params.conf has "mtl = ^ofi"; the command line
	# wins.  The ofi MTL excludes shm/tcp by default, so name the
	# provider explicitly.
	args+=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include "$prov"
	       -mca btl '^openib' -x "FI_PROVIDER=$prov")
	label="cm/ofi FI_PROVIDER=$prov"
	if [ "$prov" = opx ]; then
		: "${FI_PROVIDER_PATH:=${OPX_BUILD_DIR:-}/.libs}"
		if [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
			echo "FAIL: $FI_PROVIDER_PATH/libopx-fi.so not found" \
			     "(set OPX_BUILD_DIR or FI_PROVIDER_PATH)"
			exit 1
		fi
		export FI_PROVIDER_PATH
	fi
	[ -n "${FI_PROVIDER_PATH:-}" ] && args+=(-x FI_PROVIDER_PATH)
	if [ "$prov" = shm ]; then
		# shm advertises neither FI_LOCAL_COMM nor FI_REMOTE_COMM,
		# which the MTL always requests; see fi_local_only_preload.c.
		if ! gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -shared \
		     -fPIC -o "$bindir/fi_local_only_preload.so" \
		     "$here/fi_local_only_preload.c" -lfabric -ldl; then
			echo "FAIL: cannot build fi_local_only_preload.so"
			exit 1
		fi
		args+=(-x "LD_PRELOAD=$bindir/fi_local_only_preload.so")
		xfail="mpi_probe mpi_wildcard"
	fi
fi
# Rendezvous modes exist only in opx; anything else runs one pass.
[ "$mode" = cm ] && [ "$prov" = opx ] || modes=cma
for v in OPX_MPI_FLOOD_DEPTH OPX_MPI_FLOOD_KB OPX_MPI_FLOOD_ROUNDS \
	 OPX_MPI_LARGE_MAX_MB OPX_MPI_TEST_ALARM OPX_MPI_BUSY_S; do
	[ -n "${!v:-}" ] && args+=(-x "$v")
done
[ -n "${FI_LOG_LEVEL:-}" ] && args+=(-x FI_LOG_LEVEL)
[ -n "${FI_LOG_PROV:-}" ] && args+=(-x FI_LOG_PROV)
[ "${STRICT:-0}" = 1 ] && xfail=""
# MPI_EXTRA_ARGS: more mpirun arguments (udp.sh: hosts in network namespaces)
if [ -n "${MPI_EXTRA_ARGS:-}" ]; then
	read -ra extra <<<"$MPI_EXTRA_ARGS"
	args+=("${extra[@]}")
fi

# Crash dumps (*.btr, core) go to the scratch dir, never the source tree.
cd "$bindir" || exit 1
pass=0 fail=0 xf=0
failed=""
suite_start=$(date +%s)
echo "# MPI tests over $label, ranks: $nps, rendezvous modes: $modes"
first_mode=${modes%% *}
for rmode in $modes; do
for np in $nps; do
	for t in $tests; do
		if [ "$rmode" != "$first_mode" ] && [ "$rndv_tests" != all ] &&
		   [[ " $rndv_tests " != *" $t "* ]]; then
			continue
		fi
		margs=()
		tname="$t np=$np"
		case $rmode in
		cma) ;;
		push) margs=(-x FI_OPX_RNDV_CMA=0) ;;
		*) echo "FAIL: unknown rendezvous mode '$rmode'"; exit 1 ;;
		esac
		[ "$modes" != cma ] && tname="$tname $rmode"
		targs=()
		[ "$t" = mpi_pingpong ] && targs=(-q)
		log="$bindir/$t.np$np.$rmode.log"
		start=$(date +%s)
		timeout -k 10 "$tmo" mpirun -np "$np" "${args[@]}" "${margs[@]}" \
			"$bindir/$t" "${targs[@]}" >"$log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - start ))
		if [ $rc = 0 ] && grep -q "^PASS $t" "$log"; then
			pass=$((pass + 1))
			echo "ok   $tname (${secs}s)"
			[ "$t" = mpi_pingpong ] && [ "$np" = 2 ] && \
				grep -v '^PASS' "$log" | sed 's/^/     /'
			[ "$t" = mpi_flood ] && \
				grep '^mpi_flood: round' "$log" | sed 's/^/     /'
			continue
		fi
		why="exit $rc"
		[ $rc = 124 ] && why="timeout after ${tmo}s"
		if [[ " $xfail " == *" $t "* ]]; then
			xf=$((xf + 1))
			echo "xfail $tname ($why, ${secs}s): known $prov provider bug"
		else
			fail=$((fail + 1))
			failed="$failed $t/np$np/$rmode"
			echo "FAIL $tname ($why, ${secs}s); log: $log"
		fi
		# The test's own FAIL line, or else whatever mpirun said last
		# (e.g. "PML cm cannot be selected" when the provider is absent).
		if grep -qE 'FAIL|alarm|cannot be selected' "$log"; then
			grep -E 'FAIL|alarm|cannot be selected' "$log" | head -n 5
		else
			grep -v '^[- ]*$' "$log" | tail -n 5
		fi | sed 's/^/     /'
	done
done
done
# One-sided: MPI_Put/Get/Accumulate/Fetch_and_op through Open MPI's osc
# rdma over btl ofi on opx (opx carries the RMA and atomics).  Open MPI
# 4.1's btl ofi dereferences a NULL local registration handle in
# MPI_Compare_and_swap (mca_btl_ofi_acswap; osc rdma over vader crashes
# there too), so that call is skipped with OPX_OSC_NO_CAS=1.
if [ "$mode" = cm ] && [ "$prov" = opx ] && [ "${OSC_TESTS:-1}" = 1 ]; then
	if ! mpicc -O2 -Wall -Wextra -Werror -o "$bindir/mpi_osc" "$here/mpi_osc.c"; then
		echo "FAIL: cannot build mpi_osc"
		exit 1
	fi
	oargs=(--oversubscribe -mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include opx
	       -mca btl self,ofi -mca osc rdma -mca osc_rdma_btls ofi
	       -x FI_PROVIDER=opx -x FI_PROVIDER_PATH -x OPX_OSC_NO_CAS=1)
	[ "$(id -u)" = 0 ] && oargs+=(--allow-run-as-root)
	[ -n "${MPI_EXTRA_ARGS:-}" ] && oargs+=("${extra[@]}")
	for np in $nps; do
		log="$bindir/mpi_osc.np$np.log"
		start=$(date +%s)
		timeout -k 10 "$tmo" mpirun -np "$np" "${oargs[@]}" "$bindir/mpi_osc" >"$log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - start ))
		if [ $rc = 0 ] && grep -q "^PASS mpi_osc" "$log"; then
			pass=$((pass + 1))
			echo "ok   mpi_osc np=$np osc rdma/btl ofi (${secs}s)"
		else
			fail=$((fail + 1))
			failed="$failed mpi_osc/np$np"
			echo "FAIL mpi_osc np=$np osc rdma/btl ofi (exit $rc, ${secs}s); log: $log"
			grep -E 'FAIL|alarm|Segmentation' "$log" | head -n 5 | sed 's/^/     /'
		fi
	done
fi
echo "# total $(( $(date +%s) - suite_start ))s"
[ -n "$failed" ] && echo "# $label: failed:$failed"
if [ $xf -gt 0 ]; then
	echo "$pass passed, $fail failed ($xf expected failures)"
else
	echo "$pass passed, $fail failed"
fi
[ $fail = 0 ]
