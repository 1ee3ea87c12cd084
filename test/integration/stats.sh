#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# stats.sh - FI_OPX_STATS and opx_stats on a real job: a 2-rank MPI ring
# over opx writes one JSON file per rank; opx_stats merges them, its
# totals agree with the files (every message sent was received), and the
# PNG chart is a valid image (or the report says why it was skipped).
# Skipped (exit 77) without Open MPI or python3.
set -u
src=${OPX_SRC_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tool=$src/scripts/opx_stats
for t in mpicc mpirun python3; do
	if ! command -v $t >/dev/null 2>&1; then
		echo "SKIP: $t not found"
		exit 77
	fi
done
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-${OPX_BUILD_DIR:-.}/.libs}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/opx-stats.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! mpicc -O2 -o "$tmp/mpi_ring" "$src/test/mpi/mpi_ring.c" 2>"$tmp/mpicc.log"; then
	echo "FAIL: cannot build mpi_ring"
	cat "$tmp/mpicc.log"
	exit 1
fi
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
if ! timeout -k 5 120 mpirun -np 2 --oversubscribe "${root[@]}" -mca pml cm -mca mtl ofi \
	-mca mtl_ofi_provider_include opx -mca btl '^openib' -x FI_PROVIDER=opx \
	-x FI_PROVIDER_PATH -x "FI_OPX_STATS=$tmp/opx.%h.%p.json" "$tmp/mpi_ring" \
	>"$tmp/mpi.log" 2>&1; then
	echo "FAIL: mpirun"
	tail -n 20 "$tmp/mpi.log"
	exit 1
fi
status=0
files=("$tmp"/opx.*.json)
if [ ${#files[@]} -ne 2 ] || [ ! -e "${files[0]}" ]; then
	echo "FAIL: expected 2 stats files, found: ${files[*]}"
	exit 1
fi
echo "PASS: FI_OPX_STATS wrote one file per rank"

# The files on their own: every message one rank sent, the other received.
if ! python3 - "${files[@]}" <<'PY'
import json, sys
tx = rx = txb = rxb = 0
for p in sys.argv[1:]:
    d = json.load(open(p))
    for ep in d["endpoints"]:
        tx += sum(v["msgs"] for v in ep["tx"].values())
        rx += sum(v["msgs"] for v in ep["rx"].values())
        txb += sum(v["bytes"] for v in ep["tx"].values())
        rxb += sum(v["bytes"] for v in ep["rx"].values())
        assert sum(ep["tx_hist"]) == sum(v["msgs"] for v in ep["tx"].values())
        assert sum(ep["rx_hist"]) == sum(v["msgs"] for v in ep["rx"].values())
assert tx > 0 and tx == rx and txb == rxb, (tx, rx, txb, rxb)
open(sys.argv[1] + ".sent", "w").write("%d %d\n" % (tx, txb))
PY
then
	echo "FAIL: the stats files do not add up"
	status=1
else
	echo "PASS: messages and bytes sent = received ($(cat "${files[0]}.sent"))"
fi

if ! "$tool" --png "$tmp/sizes.png" "${files[@]}" >"$tmp/report" 2>&1; then
	echo "FAIL: opx_stats"
	cat "$tmp/report"
	exit 1
fi
read -r sent _ <"${files[0]}.sent"
if ! grep -q '^opx job report: 2 processes' "$tmp/report"; then
	echo "FAIL: report header"
	status=1
fi
# The size table's "sent" column adds up to the messages in the files.
col=$(awk '/^message sizes/ {t = 1; next} t && NF == 0 {t = 0} t && $1 != "size" {s += $2} END {print s + 0}' "$tmp/report")
if [ "$col" != "$sent" ]; then
	echo "FAIL: report's size table says $col messages sent, the files $sent"
	status=1
else
	echo "PASS: opx_stats size table adds up to $sent messages"
fi
for section in '^protocols' '^top talkers' '^anomalies'; do
	grep -q "$section" "$tmp/report" || { echo "FAIL: no '$section' in the report"; status=1; }
done
if grep -q '^chart: .*skipped' "$tmp/report"; then
	echo "note: $(grep '^chart:' "$tmp/report")"
elif [ "$(head -c 8 "$tmp/sizes.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then
	echo "PASS: the chart is a PNG image ($(stat -c %s "$tmp/sizes.png") bytes)"
else
	echo "FAIL: no valid PNG at $tmp/sizes.png"
	status=1
fi
exit $status
