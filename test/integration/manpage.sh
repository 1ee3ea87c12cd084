#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# manpage.sh - fi_opx(7) documents every FI_OPX_ parameter exactly as the
# provider defines it (name, type, help text with default and range), and
# renders without warnings.
set -u
src=${OPX_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bash "$src/scripts/gen-manpage.sh" --check "$src/man/fi_opx.7" || exit 1
if command -v groff >/dev/null 2>&1; then
	warn=$(groff -man -Tutf8 -ww -z "$src/man/fi_opx.7" 2>&1)
	if [ -n "$warn" ]; then
		echo "FAIL: groff warnings:"
		echo "$warn"
		exit 1
	fi
fi
echo "PASS: man page"
