#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# autogen.sh - generate configure and Makefile.in from a git checkout.
set -e
cd "$(dirname "$0")"
mkdir -p m4
exec autoreconf -fi
