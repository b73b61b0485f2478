#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make profile UML=1, inside User-Mode Linux: the guest half. perf runs on
# the host (UML has no perf events) around the whole UML run; this side
# runs the workloads below (rows of the table still short of the goal)
# with one QP per driver in the benchmark's topology and writes, for
# tests/bench/uml-profile.py to cut the samples by, each run's wall-clock
# window and figure ($RROCE_RUN/DRIVER-WORKLOAD.t0, .t1, .bw), the list
# of workloads ($RROCE_RUN/workloads: WORKLOAD|description) and the
# guest's /proc/kallsyms (where rroce.ko's functions are: the host sees
# the module as anonymous UML memory). A run that fails (perftest's
# handshake sometimes does under UML) is retried twice.
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/topology.sh
bench_topology || exit 1
echo 0 >/proc/sys/kernel/kptr_restrict
cat /proc/kallsyms >"$RROCE_RUN/kallsyms"
# The workloads: "PROGRAM SIZE MESSAGES MTU", each run named
# DRIVER-OPSIZE (DRIVER-OP_latSIZE for a latency test): the one row
# below the goal in the 2026-12-05 UML table (the 2-byte READ round trip),
# the 2-byte WRITE round trip beside it (which meets the goal: what the
# READ does more), and the 1 MiB READ at MTU 1024 (furthest from the copy
# rate among the 1-QP rows). PROFILE_ROWS=4k (make profile UML=1
# ROWS=4k): the 4 KiB rows instead, WRITE (short of the goal in the
# 2026-12-05 UML tables) beside SEND and READ (which meet it).
: >"$RROCE_RUN/workloads"
case ${PROFILE_ROWS:-} in
4k) set -- "ib_write_bw 4096 10000 1024" "ib_send_bw 4096 10000 1024" "ib_read_bw 4096 10000 1024" ;;
*) set -- "ib_read_lat 2 20000 1024" "ib_write_lat 2 20000 1024" "ib_read_bw 1048576 300 1024" ;;
esac
for w in "$@"; do
	set -- $w
	prog=$1 size=$2 n=$3 mtu=$4
	op=${prog#ib_}
	op=${op%_bw}
	echo "$op$size|$size-byte $prog, MTU $mtu, 1 QP, $n messages" >>"$RROCE_RUN/workloads"
	for drv in rroce rxe; do
		bench_ends $drv
		name=$drv-$op$size
		for try in 1 2 3; do
			ip netns exec $sa timeout 60 $prog -d $dev0 -m $mtu -s $size -n $n >/tmp/p.srv 2>&1 &
			wait_server $sa
			date +%s.%N >"$RROCE_RUN/$name.t0"
			ip netns exec $sb timeout 60 $prog -d $dev1 -m $mtu -s $size -n $n $ip >/tmp/p.cli 2>&1
			date +%s.%N >"$RROCE_RUN/$name.t1"
			wait
			# What each end counted in that run (retransmissions, RNR
			# NAKs, duplicates, ...): the nonzero counters, cumulative.
			for d in $dev0 $dev1; do
				echo "$name try $try: $d counters: $(rdma statistic show link $d/1 2>/dev/null |
					tr ' ' '\n' | paste - - | awk '$2 ~ /^[0-9]+$/ && $2 != 0' | paste -sd' ')"
			done
			r=$(grep -E "^ *$size " /tmp/p.cli)
			echo "$name try $try: ${r:-failed: $(tail -2 /tmp/p.cli | tr '\n' ' ')}"
			[ -n "$r" ] && break
		done
		[ -n "$r" ] || rm -f "$RROCE_RUN/$name.t0"
		# The figure with its unit: bandwidth (MiB/s) or the typical
		# round trip.
		case $prog in
		*_lat) echo "$r" | awk '{ print $5 " us typical" }' ;;
		*) echo "$r" | awk '{ print $4 " MiB/s" }' ;;
		esac >"$RROCE_RUN/$name.bw"
	done
done
bench_teardown
