# shellcheck shell=bash disable=SC2154  # variables are set by the sourcing script
# SPDX-License-Identifier: BSD-2-Clause
# bench-hosts-more.sh - sourced by bench-hosts.sh after its Open MPI part:
# the two sections that bring the hosts up again with other links or more
# hosts, MTU 1500 (opx and tcp bandwidth) and many hosts (Open MPI
# collectives), each run where it is sourced, and the functions that print
# their tables and targets among bench-hosts.sh's (m15_table, m15_targets,
# many_table, many_targets).  Uses bench-hosts.sh's hosts, helpers and
# cells (VAL); its header lists the knobs (BENCH_HOSTS_M15*,
# BENCH_HOSTS_MANY*).

# ---- a standard 1500-byte path -------------------------------------------------
# The hosts again with every link at MTU 1500 (unless they already are):
# opx against tcp, bandwidth only, loss-free and with 1 % and 5 % of every
# IP packet dropped on arrival in both hosts ("hosts.sh drop HOST PCT
# all": tcp's segments too, so both are measured under the same loss).
M15_OK=0
M15_LOSSES="0 1 5"
M15_SIZES=${BENCH_HOSTS_M15_SIZES:-"1048576 16777216"}
# m_bw15 LOSS PROV SIZE RUN: opx_bw -m bw over the 1500-byte path, MB/s.
m_bw15() {
	local loss=$1 prov=$2 size=$3 run=$4 out=$tmp/bw15.$1.$2.$3.$4 v tmo=$RUN_TMO
	[ "$loss" != 0 ] && tmo=$LOSS_TMO
	run_pair "$out" "$tmo" 1 "$BIN/opx_bw" -p "$prov" -P @PORT@ -T $((tmo - 5)) -- \
		"$BIN/opx_bw" -p "$prov" -P @PORT@ -T $((tmo - 5)) -m bw -S "$size" -t "$TARGET" "$SRV_ADDR"
	v=$(sed -n 's/^bw prov=.* mode=bw .* MBps=\([0-9.]*\).*/\1/p' "$out" | tail -n 1)
	record "m15/$loss/$prov/bw$size" max "$v" "$out" \
		"MTU 1500: $prov bandwidth $(hsize "$size"), $loss % loss" "$run"
}
if [ "${BENCH_HOSTS_M15:-1}" != 0 ] && [ $SECONDS -lt $DEADLINE ]; then
	if [ "$MTU" != 1500 ]; then
		kill_leftovers
		bash "$HOSTS" down "$P" >/dev/null 2>&1
		if ! HOSTS_MTU=1500 bash "$HOSTS" up 2 "$P" >"$tmp/up15" 2>&1; then
			NOTES+=("MTU 1500 part skipped: hosts.sh up: $(why "$tmp/up15")")
			M15_LOSSES=
		fi
	fi
	for loss in $M15_LOSSES; do
		if ! bash "$HOSTS" drop "$SRV_NS" "$loss" all >"$tmp/drop15" 2>&1 ||
			! bash "$HOSTS" drop "$CLI_NS" "$loss" all >>"$tmp/drop15" 2>&1; then
			NOTES+=("MTU 1500, $loss % loss skipped: hosts.sh drop: $(why "$tmp/drop15")")
			continue
		fi
		M15_OK=1
		for ((r = 1; r <= REPEAT; r++)); do
			for size in $M15_SIZES; do
				for prov in opx tcp; do
					[ $SECONDS -ge $DEADLINE ] && continue
					echo "  [MTU 1500, $loss % loss, run $r/$REPEAT] $prov bandwidth $(hsize "$size")" >&2
					m_bw15 "$loss" "$prov" "$size" "$r"
				done
			done
		done
	done
	bash "$HOSTS" drop "$SRV_NS" 0 >/dev/null 2>&1
	bash "$HOSTS" drop "$CLI_NS" 0 >/dev/null 2>&1
fi

# m15_table: the MTU 1500 table, when the section ran.
m15_table() {
	if [ $M15_OK = 1 ]; then
		echo "MTU 1500 on every link: opx_bw MB/s, best of $REPEAT; loss = that % of every IP packet"
		echo "(TCP's too) dropped on arrival in both hosts (hosts.sh drop HOST PCT all)"
		printf '%-26s %12s %12s %8s %14s\n' metric opx tcp opx/tcp "opx loss/none"
		for loss in $M15_LOSSES; do
			for size in $M15_SIZES; do
				printf '%-26s %12s %12s %8s %14s\n' "bw $(hsize "$size"), $loss % loss" \
					"$(v "m15/$loss/opx/bw$size")" "$(v "m15/$loss/tcp/bw$size")" \
					"$(ratio "$(v "m15/$loss/opx/bw$size")" "$(v "m15/$loss/tcp/bw$size")")" \
					"$(ratio "$(v "m15/$loss/opx/bw$size")" "$(v "m15/0/opx/bw$size")")"
			done
		done
		echo
	fi
}

# m15_targets: the MTU 1500 targets (issue 7), when the section ran.
m15_targets() {
	if [ $M15_OK = 1 ]; then
		for size in $M15_SIZES; do
			target "MTU 1500: $(hsize "$size") bw at least tcp's" "$(v "m15/0/opx/bw$size")" \
				"$(v "m15/0/tcp/bw$size")" 1 ge
			target "MTU 1500, 1 % loss: $(hsize "$size") at least 0.7x loss-free" \
				"$(v "m15/1/opx/bw$size")" "$(v "m15/0/opx/bw$size")" 0.7 ge
			target "MTU 1500, 5 % loss: $(hsize "$size") at least tcp's" \
				"$(v "m15/5/opx/bw$size")" "$(v "m15/5/tcp/bw$size")" 1 ge
		done
	fi
}

# ---- many hosts: Open MPI collectives --------------------------------------------
# MANY_N namespace hosts with 2 ranks each (shm peers within a host, udp
# between hosts for opx; vader and tcp for ob1): mpi_collbench alltoall and
# allreduce, every result checked before it is timed (a wrong one fails
# the run), loss-free and with 1 % of every IP packet dropped on arrival
# in every host.  16 ranks share the machine's cores, with the kernel's
# scheduling as it is (autogroup on, as on Debian) and opx's default
# peer timeout: what a user gets.  (Before d51d27e every second rank
# ran an auto-progress thread, and with autogroup's task group per orted
# session some opx ranks were starved into being taken for dead; the
# section then turned autogroup off and set FI_OPX_PEER_TIMEOUT=60.)
MANY_OK=0
MANY_N=${BENCH_HOSTS_MANY_N:-8}
MANY_NP=$((2 * MANY_N))
MANY_OPS="allreduce alltoall"
MANY_SIZES=${BENCH_HOSTS_MANY_SIZES:-"8 1024 65536 1048576"}
MANY_LOSSES="0 1"
MANY_TMO=$((3 * MPI_TMO))
# many_run LOSS LABEL RUN: one mpirun of mpi_collbench over every op and size.
many_run() {
	local loss=$1 label=$2 run=$3 out=$tmp/many.$1.$2.$3 rc op size v args
	# shellcheck disable=SC2054 # the comma belongs to the MCA value
	case $label in
	opx) args=(-mca pml cm -mca mtl ofi -mca mtl_ofi_provider_include opx -mca btl self
		-x FI_PROVIDER=opx -x FI_PROVIDER_PATH) ;;
	tcp) args=(-mca pml ob1 -mca btl tcp,vader,self) ;;
	esac
	timeout -k 5 "$MANY_TMO" mpirun --allow-run-as-root "${MANY_HOSTARGS[@]}" -np "$MANY_NP" \
		--map-by node --bind-to none "${args[@]}" "$MANY_BIN" -l "$label" \
		-o "${MANY_OPS// /,}" -s "${MANY_SIZES// /,}" -t 0.2 -T $((MANY_TMO - 10)) >"$out" 2>&1
	rc=$?
	for op in $MANY_OPS; do
		for size in $MANY_SIZES; do
			v=$(sed -n "s/^coll label=$label op=$op np=$MANY_NP size=$size .* usec=\([0-9.]*\).*/\1/p" \
				"$out" | tail -n 1)
			if [ -n "$v" ]; then
				keep "many/$loss/$label/$op$size" min "$v"
			elif [ "${VAL[many/$loss/$label/$op$size]:-}" != fail ]; then
				VAL[many/$loss/$label/$op$size]=fail
				FAILURES+=("$MANY_N hosts, $loss % loss: $label $op $(hsize "$size"), run $run: mpirun rc $rc: $(mpi_why "$out")")
			fi
		done
	done
	kill_leftovers
}
if [ "${BENCH_HOSTS_MANY:-1}" != 0 ] && [ "${BENCH_HOSTS_MPI:-1}" != 0 ] && [ $SECONDS -lt $DEADLINE ]; then
	MANY_BIN=$tmp/mpi_collbench
	if mpi_build mpi_collbench "$MANY_BIN"; then
		kill_leftovers
		bash "$HOSTS" down "$P" >/dev/null 2>&1
		if ! bash "$HOSTS" up "$MANY_N" "$P" >"$tmp/upmany" 2>&1; then
			NOTES+=("$MANY_N hosts part skipped: hosts.sh up: $(why "$tmp/upmany")")
		elif ! hostargs=$(HOSTS_SLOTS=2 bash "$HOSTS" mpirun-args "$P" 2>&1); then
			FAILURES+=("$MANY_N hosts: hosts.sh mpirun-args $P: $hostargs")
		else
			read -r -a MANY_HOSTARGS <<<"$hostargs"
			for loss in $MANY_LOSSES; do
				fails=0
				for ((i = 1; i <= MANY_N; i++)); do
					bash "$HOSTS" drop "$P$i" "$loss" all >"$tmp/dropmany" 2>&1 || fails=1
				done
				if [ $fails = 1 ]; then
					NOTES+=("$MANY_N hosts, $loss % loss skipped: hosts.sh drop: $(why "$tmp/dropmany")")
					continue
				fi
				MANY_OK=1
				for ((r = 1; r <= REPEAT; r++)); do
					for label in opx tcp; do
						[ $((SECONDS + 30)) -ge $DEADLINE ] && continue
						echo "  [$MANY_N hosts x 2 ranks, $loss % loss, run $r/$REPEAT] $label collectives" >&2
						many_run "$loss" "$label" "$r"
					done
				done
			done
			for ((i = 1; i <= MANY_N; i++)); do
				bash "$HOSTS" drop "$P$i" 0 >/dev/null 2>&1
			done
		fi
	fi
fi

# many_table: the many-hosts table, when the section ran.
many_table() {
	if [ $MANY_OK = 1 ]; then
		echo "Open MPI collectives, $MANY_N namespace hosts x 2 ranks ($MANY_NP ranks on $(nproc) cores), best of"
		echo "$REPEAT mpirun: usec per operation (mpi_collbench, results checked); opx = pml cm + mtl ofi"
		echo "on opx, tcp = pml ob1 + btl tcp,vader,self; loss = that % of every IP packet dropped in every host"
		printf '%-26s %12s %12s %8s\n' operation opx tcp opx/tcp
		for loss in $MANY_LOSSES; do
			for op in $MANY_OPS; do
				for size in $MANY_SIZES; do
					printf '%-26s %12s %12s %8s %s\n' "$op $(hsize "$size"), $loss % loss" \
						"$(v "many/$loss/opx/$op$size")" "$(v "many/$loss/tcp/$op$size")" \
						"$(ratio "$(v "many/$loss/opx/$op$size")" "$(v "many/$loss/tcp/$op$size")")" \
						"$(behind lat "$(v "many/$loss/opx/$op$size")" "$(v "many/$loss/tcp/$op$size")")"
				done
			done
		done
		echo
	fi
}

# many_targets: the many-hosts targets (issue 29), when the section ran.
many_targets() {
	if [ $MANY_OK = 1 ]; then
		for op in $MANY_OPS; do
			for size in $MANY_SIZES; do
				target "$MANY_N hosts: $op $(hsize "$size") at most ob1 tcp's time" \
					"$(v "many/0/opx/$op$size")" "$(v "many/0/tcp/$op$size")" 1 le
			done
		done
	fi
}
