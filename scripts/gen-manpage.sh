#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# gen-manpage.sh - the RUNTIME PARAMETERS of man/fi_opx.7 come from the
# provider's own parameter table, as "fi_info -e" prints it, so the man
# page and the provider cannot drift apart.
#
#   scripts/gen-manpage.sh [--check] [MANPAGE]
# Rewrites the block between the OPX-PARAMS-BEGIN/END markers of MANPAGE
# (default: man/fi_opx.7 of this tree), or with --check prints the
# difference and exits 1 when the page is out of date.  Needs fi_info and
# the built module (FI_PROVIDER_PATH, as "make check" sets it).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
fi
page=${1:-$REPO/man/fi_opx.7}

params=$(FI_LOG_LEVEL=warn fi_info -e -p opx 2>/dev/null | tr -d '\000')
# A parameter is two lines: "# FI_OPX_NAME: Type" and "# opx: help".
block=$(printf '%s\n' "$params" | awk '
	/^# FI_OPX_[A-Z0-9_]+: / {
		name = $2; sub(/:$/, "", name)
		type = $0; sub(/^# [^:]*: /, "", type)
		sub(/ \(.*/, "", type)
		next
	}
	/^# opx: / && name != "" {
		help = $0; sub(/^# opx: /, "", help)
		gsub(/\\/, "\\\\e", help)
		sub(/^[.'"'"']/, "\\\\\\&&", help)
		printf ".TP\n.B %s\n(%s) %s\n", name, tolower(type), help
		name = ""
	}')
if [ -z "$block" ]; then
	echo "gen-manpage.sh: fi_info -e -p opx listed no FI_OPX_ parameter" \
	     "(is FI_PROVIDER_PATH set to the built module?)" >&2
	exit 2
fi

new=$(awk -v block="$block" '
	/OPX-PARAMS-BEGIN/ { print; print block; skip = 1; next }
	/OPX-PARAMS-END/ { skip = 0 }
	!skip { print }' "$page")

if [ $check = 1 ]; then
	if ! diff -u "$page" <(printf '%s\n' "$new"); then
		echo "gen-manpage.sh: $page is out of date: run scripts/gen-manpage.sh" >&2
		exit 1
	fi
	echo "man page lists all $(grep -c '^\.B FI_OPX_' <<<"$block") FI_OPX_ parameters"
	exit 0
fi
printf '%s\n' "$new" >"$page"
