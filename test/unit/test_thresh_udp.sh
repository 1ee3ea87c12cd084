#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# test_thresh with every peer on the udp wire (FI_OPX_WIRE=udp): the
# loopback endpoint reaches itself through its UDP socket, so the udp
# wire's eager limit (FI_OPX_UDP_EAGER_MAX) applies and not the shm one;
# then with the limits the other way round (udp below shm), and with the
# defaults (test_match's sweep is around 8, 16, 32 and 64 KiB).
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
export FI_OPX_WIRE=udp
"$dir/test_thresh"
FI_OPX_EAGER_MAX=24576 FI_OPX_UDP_EAGER_MAX=12288 "$dir/test_thresh"
