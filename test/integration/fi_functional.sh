#!/bin/bash
# Run the two-process libfabric functional suite (opx_fi_test) for a
# provider (default opx).  Uses the automake-built binary when present,
# otherwise compiles test/integration/opx_fi_{test,subtests,subtests_large}.c into a
# temp dir.  For opx the suite runs once per rendezvous path: the default
# (single-copy Cross Memory Attach pull) and FI_OPX_RNDV_CMA=0 (SDMA/TID
# push), since every message above the eager limit takes one or the other.
#
#   PROV=opx|shm|tcp     provider (default opx); extra args go to the program
#   OPX_BUILD_DIR        automake build dir (binary + .libs/libopx-fi.so)
#   FI_PROVIDER_PATH     where libopx-fi.so lives (default $OPX_BUILD_DIR/.libs)
#   RNDV_MODES="cma push"  opx rendezvous paths to run (push = FI_OPX_RNDV_CMA=0)
#   TEST_TIMEOUT=400     timeout in seconds for each run
set -u
here=$(cd "$(dirname "$0")" && pwd)
prov=${PROV:-opx}
bin=""
tmp=""

if [ -n "${OPX_BUILD_DIR:-}" ] && [ -x "$OPX_BUILD_DIR/test/integration/opx_fi_test" ]; then
	bin=$OPX_BUILD_DIR/test/integration/opx_fi_test
else
	tmp=$(mktemp -d /tmp/opx-fi-test.XXXXXX) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	bin=$tmp/opx_fi_test
	if ! gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror \
	     -o "$bin" "$here/opx_fi_test.c" "$here/opx_fi_subtests.c" "$here/opx_fi_subtests_large.c" \
	     -lfabric; then
		echo "FAIL: cannot build opx_fi_test"
		exit 1
	fi
fi

if [ "$prov" = opx ]; then
	export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-${OPX_BUILD_DIR:-.}/.libs}
	if [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
		echo "FAIL: $FI_PROVIDER_PATH/libopx-fi.so not found" \
		     "(set OPX_BUILD_DIR or FI_PROVIDER_PATH)"
		exit 1
	fi
fi
export FI_PROVIDER=$prov

# Run from a scratch dir: libfabric's crash handler writes *.btr files
# into the working directory when a provider crashes.
tmp=${tmp:-$(mktemp -d /tmp/opx-fi-test.XXXXXX)} || exit 1
[ -z "$bin" ] || case "$bin" in /*) ;; *) bin=$PWD/$bin ;; esac
cd "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
modes=${RNDV_MODES:-"cma push"}
[ "$prov" = opx ] || modes=default
status=0
for m in $modes; do
	case $m in
	cma|default) env=() ;;
	push) env=(FI_OPX_RNDV_CMA=0) ;;
	*) echo "FAIL: unknown rendezvous mode '$m'"; exit 1 ;;
	esac
	echo "# ${env[*]:+${env[*]} }$bin -p $prov $*"
	start=$(date +%s)
	env "${env[@]}" timeout -k 10 "${TEST_TIMEOUT:-400}" "$bin" -p "$prov" "$@"
	rc=$?
	[ $rc = 124 ] && echo "FAIL: opx_fi_test timed out"
	echo "# rendezvous mode $m: exit $rc, $(( $(date +%s) - start ))s"
	[ $rc = 0 ] || status=$rc
done
exit $status
