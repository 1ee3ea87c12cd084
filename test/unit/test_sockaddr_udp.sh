#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# test_sockaddr again with every peer on the udp wire (FI_OPX_WIRE=udp):
# endpoints of this host that know each other by socket address talk
# through their sockets, a peer inserted after it spoke is known from its
# flow, and FI_SOURCE_ERR gives the sender's socket address.
set -eu
dir=${OPX_BUILD_DIR:-.}/test/unit
export FI_OPX_WIRE=udp
"$dir/test_sockaddr"
