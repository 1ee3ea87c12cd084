#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# test-all.sh - everything CI checks, in one command:
#   1. Debian packages (via main-job.sh --deps-only)
#   2. gcc in-tree build + "make check": all unit and integration tests,
#      built the way many users build, "./configure && make" in the source
#      tree itself (in a local git clone, see build_intree), run beside
#      two busy loops (with_hog): the suite must pass on a busy machine
#   3. ASan+UBSan build (--enable-sanitizers) running the unit tests, then
#      the integration and MPI suites with the sanitizer runtime preloaded
#   4. clang -Werror debug build (--enable-debug) of everything, tests
#      included, running the unit tests with the lock assertions armed
#   5. make distcheck: the release tarball configures, builds, passes the
#      unit, man page and install tests, installs and uninstalls cleanly
#   0. (before 2) the call graph of prov/ and driver-shim/ has no call
#      circle beyond the known ones (scripts/callgraph.sh)
# Every stage runs even if an earlier independent one failed, so one CI run
# reports all breakage; the exit status is non-zero if any stage failed,
# and the test-suite logs of failing builds are printed.
#
# Builds go to <repo>/build-intree/src (the clone configured in place),
# build-asan, build-clang and build-dist (out of tree).
# Environment: OPX_JOBS (make -j, default: cores, at most 4).
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${OPX_JOBS:-$(nproc)}
[ "$JOBS" -gt 4 ] && JOBS=4

failed=()
passed=()

log() { printf '\n==> [%s] %s\n' "$(date +%T)" "$*"; }

# A failed "make check" leaves test-suite.log, which already holds the
# full log of every failing test; a failed build has printed its errors.
show_logs() {
	local l
	for l in "$1/test-suite.log" "$1/src/test-suite.log"; do
		if [ -f "$l" ]; then
			echo "--- $l"
			cat "$l"
		fi
	done
}

# stage NAME DIR COMMAND...: run COMMAND in DIR (created fresh), record it.
stage() {
	local name=$1 dir=$2 t0=$SECONDS
	shift 2
	log "$name"
	rm -rf "$dir"
	mkdir -p "$dir"
	if (cd "$dir" && "$@"); then
		passed+=("$name ($((SECONDS - t0))s)")
	else
		failed+=("$name ($((SECONDS - t0))s)")
		show_logs "$dir"
	fi
}

# In-tree: configure, build and test in the source tree itself, which
# puts Makefiles, objects and test logs next to the sources (the tests
# must not take those for sources).  Configuring $REPO itself in place
# would break the out-of-tree builds, so this builds a local clone of it:
# committed files only, as CI's own fresh clone.  Out-of-tree builds stay
# covered by the ASan stage's tests, the clang build and distcheck.
build_intree() {
	git clone -q "$REPO" src &&
		cd src &&
		./autogen.sh &&
		./configure &&
		make -j"$JOBS" &&
		make -j"$JOBS" check-build &&
		with_hog make check
}

# with_hog CMD...: run CMD beside OPX_CI_HOG (default 2) busy loops, as on
# a machine where other users compute: a test that assumes a process is
# scheduled, has written a file or answered within some time fails here
# before it fails for a user.  OPX_CI_HOG=0 runs CMD alone.  Returns CMD's
# exit status.  Beside the loops CMD (a program: it is exec'ed) runs in the
# background and this shell waits for it, because bash runs a trap only
# once a foreground command has returned but interrupts a wait: an INT or
# TERM (a cancelled CI) ends CMD and the loops at once, then this shell by
# the same signal.  CMD stays in the caller's process group, so a signal to
# the group (Ctrl-C, a runner ending the job) reaches every process of it
# as before; that group is not killed from here, it holds the caller too.
with_hog() {
	local n=${OPX_CI_HOG:-2} pids=() rc i cmd stop
	for ((i = 0; i < n; i++)); do
		sh -c 'while :; do :; done' &
		pids+=($!)
	done
	if [ "${#pids[@]}" -eq 0 ]; then
		"$@"
		return
	fi
	echo "test-all.sh: $n busy loops beside: $*"
	# bash starts a background command with INT and QUIT ignored and stdin
	# on /dev/null: give CMD what a foreground command gets
	(
		trap - INT QUIT
		exec "$@"
	) <&0 &
	cmd=$!
	# the pids expand now, $BASHPID (this shell, maybe a subshell) when
	# the trap runs
	stop="kill $cmd ${pids[*]} 2>/dev/null; wait ${pids[*]} 2>/dev/null"
	# shellcheck disable=SC2064
	trap "$stop; trap - INT; kill -s INT \$BASHPID" INT
	# shellcheck disable=SC2064
	trap "$stop; trap - TERM; kill -s TERM \$BASHPID" TERM
	wait "$cmd"
	rc=$?
	trap - INT TERM
	kill "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null
	return $rc
}

# The unit tests link the instrumented core directly (leak checking on).
# fi_pingpong, mpirun and bash are not instrumented, yet they dlopen() the
# instrumented module: the ASan runtime must be the first library in every
# such process, so the integration and MPI suites run with it preloaded.
# Leak checking is off there because the launchers and libfabric itself
# are outside our control; memory errors and UB in opx still fail the run.
build_asan() {
	# halt_on_error makes UBSan findings fail the test instead of only
	# printing; leak checking stays on (ASan's default).
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
	export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
	"$REPO/configure" --enable-sanitizers &&
		make -j"$JOBS" check-build &&
		make check-unit || return 1
	cp test-suite.log unit-suite.log
	local rt
	rt="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
	LD_PRELOAD=$rt ASAN_OPTIONS=abort_on_error=0:detect_leaks=0 \
		make check-integration
}

# clang builds the debug configuration: -Werror over every file, and
# the unit suites (not their wrappers: about a minute) run with every
# *_locked function asserting that its caller holds the lock.  The gcc
# builds above cover the release configuration.
build_clang() {
	CC=clang "$REPO/configure" --enable-werror --enable-debug &&
		make -j"$JOBS" &&
		make -j"$JOBS" check-build &&
		make check TESTS='$(UNIT_TESTS)'
}

# The release tarball: the unit suites and the install checks are enough
# to prove it is complete (the integration suites already ran above).
build_distcheck() {
	"$REPO/configure" &&
		make -j"$JOBS" distcheck TESTS='test/unit/test_shim test/unit/test_shim_ring test/unit/test_info test/unit/test_api test/integration/manpage.sh test/integration/install.sh'
}

log "dependencies"
if ! bash "$REPO/scripts/main-job.sh" --deps-only; then
	echo "test-all.sh: installing dependencies failed" >&2
	exit 1
fi

log "autoreconf"
if ! (cd "$REPO" && ./autogen.sh); then
	echo "test-all.sh: autoreconf failed" >&2
	exit 1
fi

if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	echo "test-all.sh: note: the in-tree build clones $REPO: its uncommitted" \
		"changes are not in that build (the other builds have them)"
fi
# The call graph: no call circle among the files of prov/ or driver-shim/
# beyond the known ones (scripts/callgraph.known), which can only shrink.
stage "call graph: no new circle (scripts/callgraph.sh)" "$REPO/build-callgraph" \
	bash "$REPO/scripts/callgraph.sh"
stage "gcc in-tree build + make check (unit + integration)" "$REPO/build-intree" build_intree
stage "ASan+UBSan build + unit, integration and MPI tests" "$REPO/build-asan" build_asan
stage "clang -Werror debug build + unit tests" "$REPO/build-clang" build_clang
stage "make distcheck" "$REPO/build-dist" build_distcheck

echo
echo "==================== test-all summary ===================="
for s in "${passed[@]}"; do echo "PASS: $s"; done
for s in "${failed[@]}"; do echo "FAIL: $s"; done
echo "elapsed ${SECONDS}s"
# One closing line over every test that ran (automake's per-build totals).
npass=0
nfail=0
for log in "$REPO"/build-intree/src/test-suite.log "$REPO"/build-asan/unit-suite.log \
	"$REPO"/build-asan/test-suite.log "$REPO"/build-clang/test-suite.log; do
	[ -f "$log" ] || continue
	p=$(awk '/^# PASS:/ {print $3; exit}' "$log")
	f=$(awk '/^# (FAIL|ERROR):/ {s += $3} END {print s + 0}' "$log")
	npass=$((npass + ${p:-0}))
	nfail=$((nfail + ${f:-0}))
done
nfail=$((nfail + ${#failed[@]}))
echo "$npass passed, $nfail failed"
[ ${#failed[@]} -eq 0 ]
