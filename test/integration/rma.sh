#!/bin/bash
# One-sided operations between processes (opx_rma_test): a target and
# three initiators, once with 0-based offsets and user keys, once with
# FI_MR_VIRT_ADDR and provider keys; then large operations by chunks only
# (FI_OPX_RMA_CMA=0) and with targets that refuse CMA (FI_OPX_RNDV_CMA=0:
# the initiators try, are told no, and resend by chunks).  See
# opx_rma_test.c for what is checked.
#   OPX_BUILD_DIR     automake build dir (binary + .libs/libopx-fi.so)
#   FI_PROVIDER_PATH  where libopx-fi.so lives (default $OPX_BUILD_DIR/.libs)
#   TEST_TIMEOUT=300  timeout in seconds for each run
set -u
bin=${OPX_BUILD_DIR:-.}/test/integration/opx_rma_test
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-${OPX_BUILD_DIR:-.}/.libs}
export FI_PROVIDER=opx
if [ ! -x "$bin" ] || [ ! -e "$FI_PROVIDER_PATH/libopx-fi.so" ]; then
	echo "FAIL: $bin or $FI_PROVIDER_PATH/libopx-fi.so missing (set OPX_BUILD_DIR)"
	exit 1
fi
case "$bin" in /*) ;; *) bin=$PWD/$bin ;; esac
# libfabric's crash handler writes *.btr files into the working directory
tmp=$(mktemp -d /tmp/opx-rma-test.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
status=0
for run in ":" "-v:" ":FI_OPX_RMA_CMA=0" "-v:FI_OPX_RNDV_CMA=0"; do
	mode=${run%%:*}
	envs=${run#*:}
	echo "# $envs $bin -p opx $mode"
	start=$(date +%s)
	env $envs timeout -k 10 "${TEST_TIMEOUT:-300}" "$bin" -p opx $mode
	rc=$?
	[ $rc = 124 ] && echo "FAIL: opx_rma_test $mode timed out"
	echo "# exit $rc, $(( $(date +%s) - start ))s"
	[ $rc = 0 ] || status=$rc
done
exit $status
