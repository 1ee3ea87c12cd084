#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The matching suite again with Cross Memory Attach off, so every
# rendezvous message takes the SDMA/TID push path (CTS -> SDMA engine ->
# TID placement) instead of the single-copy pull.
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
FI_OPX_RNDV_CMA=0 exec "$dir/test_match"
