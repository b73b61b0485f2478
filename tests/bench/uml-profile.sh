#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make profile UML=1, inside User-Mode Linux: the guest half. perf runs on
# the host (UML has no perf events) around the whole UML run; this side
# runs 64 KiB ib_send_bw at MTU 1024 with one QP per driver (3000
# messages) in the benchmark's topology, writes each run's wall-clock
# window ($RROCE_RUN/DRIVER.t0, .t1) for tests/bench/uml-profile.py to cut
# the samples by, and the guest's /proc/kallsyms (where rroce.ko's
# functions are: the host sees the module as anonymous UML memory). A run
# that fails (perftest's handshake sometimes does under UML) is retried
# twice.
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/topology.sh
bench_topology || exit 1
echo 0 >/proc/sys/kernel/kptr_restrict
cat /proc/kallsyms >"$RROCE_RUN/kallsyms"
for drv in rroce rxe; do
	bench_ends $drv
	for try in 1 2 3; do
		ip netns exec $sa timeout 60 ib_send_bw -d $dev0 -m 1024 -s 65536 -n 3000 >/tmp/p.srv 2>&1 &
		wait_server $sa
		date +%s.%N >"$RROCE_RUN/$drv.t0"
		ip netns exec $sb timeout 60 ib_send_bw -d $dev1 -m 1024 -s 65536 -n 3000 $ip >/tmp/p.cli 2>&1
		date +%s.%N >"$RROCE_RUN/$drv.t1"
		wait
		r=$(grep -E '^ *65536 ' /tmp/p.cli)
		echo "$drv try $try: ${r:-failed: $(tail -2 /tmp/p.cli | tr '\n' ' ')}"
		[ -n "$r" ] && break
	done
	[ -n "$r" ] || rm -f "$RROCE_RUN/$drv.t0"
	echo "$r" | awk '{ print $4 }' >"$RROCE_RUN/$drv.bw"
done
bench_teardown
