#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# callgraph.sh - which file calls which, and the circles among them.
#
# Compiles every .c of prov/ and driver-shim/ once more with gcc's call
# graph dump (-fdump-ipa-cgraph, -O0 so nothing is inlined away), maps
# each exported function to the file that defines it, and draws an arrow
# A -> B when a function compiled into A calls one defined in B (static
# inline functions of a header count as the file that includes them, so a
# header that calls into a .c file shows as an arrow from its users).
# Calls through function pointers (fi_ops tables, shim ops) are not
# arrows: that is how a lower layer is meant to call back up.
#
# A circle (files that reach each other through arrows) is a strongly
# connected component of that graph.  The design (ARCHITECTURE.md, README
# "Architecture") wants none: data flows one way.  Known circles are
# listed in scripts/callgraph.known, one line per circle, its files in
# alphabetical order separated by spaces; this script fails when a circle
# is found that no known one contains (a new circle, or a known one that
# grew), so the structure can only get better.  It says so when a known
# circle is gone or has shrunk, so the list is trimmed with the code.
#
# Usage: scripts/callgraph.sh [-v] [DIR...]   (default: prov driver-shim)
#   -v   also print every arrow
# Needs gcc only.  Exit: 0 no new circle, 1 a new circle, 2 usage/compile.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
known=${CALLGRAPH_KNOWN:-$top/scripts/callgraph.known}
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
dirs=("$@")
[ ${#dirs[@]} = 0 ] && dirs=(prov driver-shim)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/opx-callgraph.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
cc=${CC_CALLGRAPH:-gcc}

# one dump per file: <dir>__<file>.cgraph; one table of (file, kind, name):
#   D name  - a function with external linkage defined in file
#   C name  - a call made from code compiled into file
for d in "${dirs[@]}"; do
	[ -d "$top/$d" ] || { echo "callgraph.sh: no directory $top/$d" >&2; exit 2; }
	for c in "$top/$d"/*.c; do
		f=$d/$(basename "$c")
		o=$tmp/${f//\//__}
		if ! (cd "$tmp" && "$cc" -std=c11 -D_GNU_SOURCE -O0 -w -I"$top/include" \
			-I"$top/$d" -I"$top" -fdump-ipa-cgraph -dumpbase "${o##*/}" \
			-c "$c" -o "$o.o") 2>"$o.err"; then
			echo "callgraph.sh: cannot compile $f:" >&2
			cat "$o.err" >&2
			exit 2
		fi
		dumps=("$o"*cgraph)
		dump=${dumps[0]}
		[ -f "$dump" ] || { echo "callgraph.sh: no call graph dump for $f" >&2; exit 2; }
		# a node: "name/N (name) @0x..", then Type:, Visibility:, Calls:
		awk -v f="$f" '
			/^[A-Za-z_][A-Za-z_0-9.]*\/[0-9]+ / { split($1, a, "/"); name = a[1]; def = 0; next }
			/^  Type: function definition/ { def = 1; next }
			/^  Visibility:/ { if (def && $0 !~ / external / && $0 ~ /public/) print f, "D", name; next }
			/^  Calls:/ { if (!def) next
				for (i = 2; i <= NF; i++) { split($i, a, "/"); print f, "C", a[1] } }
		' "$dump" >>"$tmp/table"
	done
done

# arrows: "A B", once each, A != B
awk '$2 == "D" { def[$3] = $1 }
     $2 == "C" { call[$1 " " $3] = 1 }
     END { for (k in call) { split(k, a, " ")
		if ((a[2] in def) && def[a[2]] != a[1]) print a[1], def[a[2]] } }' \
	"$tmp/table" | sort -u >"$tmp/arrows"

if [ $verbose = 1 ]; then
	echo "# arrows (caller file -> defining file)"
	sed 's/ / -> /' "$tmp/arrows"
fi

# circles: files i, j with i ->* j and j ->* i (transitive closure; the
# graph has a few dozen nodes)
awk '{ n[$1] = 1; n[$2] = 1; r[$1, $2] = 1 }
     END {
	for (k in n) for (i in n) if ((i, k) in r) for (j in n) if ((k, j) in r) r[i, j] = 1
	for (i in n) {
		if (seen[i] || !((i, i) in r)) continue
		line = ""
		for (j in n) if ((i, j) in r && (j, i) in r) { seen[j] = 1; line = line " " j }
		print line
	}
     }' "$tmp/arrows" |
	while read -r -a members; do
		printf '%s\n' "${members[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
		echo
	done | sort >"$tmp/circles"

# contains KNOWN-LINE CIRCLE-LINE: every file of the circle is in the known one
contains() {
	local f
	for f in $2; do [[ " $1 " == *" $f "* ]] || return 1; done
}

status=0
nfiles=$(awk '$2 == "D" { print $1 }' "$tmp/table" | sort -u | wc -l)
echo "# call graph of ${dirs[*]}: $nfiles files, $(wc -l <"$tmp/arrows") arrows," \
	"$(grep -c . "$tmp/circles") circle(s)"
knownlines=()
if [ -f "$known" ]; then
	mapfile -t knownlines < <(grep -v '^#' "$known" | grep .)
fi
while read -r circle; do
	[ -n "$circle" ] || continue
	n=$(wc -w <<<"$circle")
	ok=0
	for k in "${knownlines[@]}"; do
		contains "$k" "$circle" && { ok=1; break; }
	done
	if [ $ok = 1 ]; then
		echo "known circle of $n files: $circle"
	else
		echo "NEW circle of $n files: $circle"
		status=1
	fi
	# the arrows inside it, so whoever broke it sees where
	if [ $ok = 0 ] || [ $verbose = 1 ]; then
		awk -v c=" $circle " 'index(c, " " $1 " ") && index(c, " " $2 " ") { print "    " $1 " -> " $2 }' \
			"$tmp/arrows"
	fi
done <"$tmp/circles"
for k in "${knownlines[@]}"; do
	found=0
	while read -r circle; do
		[ "$circle" = "$k" ] && { found=1; break; }
	done <"$tmp/circles"
	[ $found = 1 ] || echo "note: known circle gone or smaller, trim scripts/callgraph.known: $k"
done
[ $status = 0 ] || echo "FAIL: a call circle that is not in scripts/callgraph.known (see ARCHITECTURE.md: data flows one way)"
exit $status
