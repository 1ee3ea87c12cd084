#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The matching and threading suites again with Cross Memory Attach off, so
# every rendezvous message takes the SDMA/TID push path (CTS -> SDMA engine
# -> TID placement) instead of the single-copy pull.
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
export FI_OPX_RNDV_CMA=0
"$dir/test_match"
"$dir/test_match_queue"
"$dir/test_thread"
