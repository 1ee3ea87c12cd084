#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The one-sided suites again with every peer on the udp wire
# (FI_OPX_WIRE=udp): the loopback endpoint reaches itself through its UDP
# socket, so chunks are the path's datagrams, large reads and writes never
# try Cross Memory Attach (a udp peer has no process here to copy with),
# and keys, refusals, CQ data, counters and atomics behave as on shm.
# Then test_msg, test_api and test_match: among them a second endpoint
# bound to an AV whose udp peers are the first endpoint's (it must send
# through its own socket: test_msg's test_source_err failed before).
# And test_progress: an empty poll of the udp socket counts 25 looks at
# the rings towards the yield.
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
export FI_OPX_WIRE=udp
"$dir/test_rma"
"$dir/test_rma_cma"
"$dir/test_atomic"
"$dir/test_msg"
"$dir/test_api"
"$dir/test_match"
"$dir/test_progress"
