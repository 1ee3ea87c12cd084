#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# test_sep again with every peer on the udp wire (FI_OPX_WIRE=udp): each
# context of a scalable endpoint is its own UDP socket (consecutive ports
# from the name's), every datagram authenticated as on any udp flow; the
# contexts of one endpoint, a plain endpoint and another process reach
# them through the loopback's sockets.
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
export FI_OPX_WIRE=udp
"$dir/test_sep"
