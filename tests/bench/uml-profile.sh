#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make profile UML=1, inside User-Mode Linux: the guest half. perf runs on
# the host (UML has no perf events) around the whole UML run; this side
# runs 64 KiB ib_send_bw (3000 messages) and 64-byte ib_write_bw (20000)
# at MTU 1024 with one QP per driver in the benchmark's topology, writes
# each run's wall-clock window ($RROCE_RUN/DRIVER-WORKLOAD.t0, .t1, .bw)
# for tests/bench/uml-profile.py to cut
# the samples by, and the guest's /proc/kallsyms (where rroce.ko's
# functions are: the host sees the module as anonymous UML memory). A run
# that fails (perftest's handshake sometimes does under UML) is retried
# twice.
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/topology.sh
bench_topology || exit 1
echo 0 >/proc/sys/kernel/kptr_restrict
cat /proc/kallsyms >"$RROCE_RUN/kallsyms"
# Two workloads: 64 KiB SENDs (the bandwidth rows) and 64-byte WRITEs
# (a row where rroce trails rxe); each run is named DRIVER-WORKLOAD.
for w in "send 65536 3000" "write 64 20000"; do
	set -- $w
	op=$1 size=$2 n=$3
	for drv in rroce rxe; do
		bench_ends $drv
		name=$drv-$op$size
		for try in 1 2 3; do
			ip netns exec $sa timeout 60 ib_${op}_bw -d $dev0 -m 1024 -s $size -n $n >/tmp/p.srv 2>&1 &
			wait_server $sa
			date +%s.%N >"$RROCE_RUN/$name.t0"
			ip netns exec $sb timeout 60 ib_${op}_bw -d $dev1 -m 1024 -s $size -n $n $ip >/tmp/p.cli 2>&1
			date +%s.%N >"$RROCE_RUN/$name.t1"
			wait
			r=$(grep -E "^ *$size " /tmp/p.cli)
			echo "$name try $try: ${r:-failed: $(tail -2 /tmp/p.cli | tr '\n' ' ')}"
			[ -n "$r" ] && break
		done
		[ -n "$r" ] || rm -f "$RROCE_RUN/$name.t0"
		echo "$r" | awk '{ print $4 }' >"$RROCE_RUN/$name.bw"
	done
done
bench_teardown
