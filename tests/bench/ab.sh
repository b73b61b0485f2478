#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench-ab PARAM=NAME, inside the VM: rroce against itself with one of
# its boolean module parameters on (A) and off (B), or (make bench-ab
# BASE=COMMIT: BENCH_AB_MODULE_B set) this tree's module (A) against an
# earlier commit's (B), swapped between runs, same boot, same
# topology as the table (tests/bench/topology.sh), runs interleaved A/B,
# on the rows where a datapath change shows (bandwidth at 64 KiB and 1 MiB,
# both MTUs, 1 and 4 QPs; 4 KiB READ, SEND and WRITE; 64-byte WRITE; 2-byte
# latency; with BENCH_AB_ROWS=lat only 64-byte and 4 KiB READ, SEND and
# WRITE and the latencies; with BENCH_AB_ROWS=read the READ rows; with
# BENCH_AB_ROWS=mtu4096 the 64 KiB and 1 MiB rows at MTU 4096). Writes
# one CSV line per run to $RROCE_RUN/ab.csv: side,test,size,mtu,qps,rep,value
# (side A or B; value in MiB/s or usec, as the table's).
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
. tests/bench/topology.sh
PARAM=${BENCH_AB_PARAM:?which module parameter}
MODULE_B=${BENCH_AB_MODULE_B:-}
P=/sys/module/rroce/parameters/$PARAM
if [ -n "$MODULE_B" ]; then
	[ -f "$MODULE_B" ] && [ -f "$RROCE_MODULE" ] || { echo "no module $MODULE_B or $RROCE_MODULE"; exit 1; }
else
	[ -w "$P" ] || { echo "no writable module parameter $PARAM"; exit 1; }
fi
REPS=${BENCH_REPS:-5}
OUT=$RROCE_RUN/ab.csv
: >"$OUT"
bench_topology || exit 1
sa=ns0 sb=ns1 dev0=rroce0 dev1=rroce1 ip=192.0.2.1

# With two modules: the one loaded now (A: the tree's, inserted at boot).
loaded=A
# use SIDE: module A or B loaded, with the rroce devices on it (the
# topology's veths and namespaces stay); or the parameter on or off.
use() {
	local m
	if [ -z "$MODULE_B" ]; then
		if [ "$1" = A ]; then echo Y >"$P"; else echo N >"$P"; fi
		return 0
	fi
	[ "$1" = "$loaded" ] && return 0
	m=$RROCE_MODULE
	[ "$1" = A ] || m=$MODULE_B
	rroce_devices del && rmmod rroce && insmod "$m" && rroce_devices add || return 1
	loaded=$1
	sleep 1
}

# one SIDE PROG SIZE KIND MTU QPS REP (sizes from bench_iters).
one() {
	local side=$1 prog=$2 size=$3 kind=$4 mtu=$5 qps=$6 rep=$7 v
	use "$side" || { echo "cannot switch to module $side"; exit 1; }
	v=$(bench_run "$prog" "$size" "$kind" "$mtu" "$qps")
	echo "$side,$prog,$size,$mtu,$qps,$rep,${v:-fail}" >>"$OUT"
	[ -n "$v" ] || bench_why_failed "$PARAM=$side $prog $size mtu $mtu x$qps #$rep"
	echo "  $PARAM=$side $prog $size mtu $mtu x$qps #$rep: ${v:-FAILED}"
}
ab() {
	local rep
	for rep in $(seq "$REPS"); do
		one A "$@" "$rep"
		one B "$@" "$rep"
	done
}
# BENCH_AB_ROWS=lat (make bench-ab ROWS=lat): only the latency rows and
# the small-message ones (64 B and 4 KiB), for a change that steers small
# messages.
# BENCH_AB_ROWS=read: the READ rows only (every size, MTU and QP count
# of the table, both READ latencies), for a change that steers READs.
# BENCH_AB_ROWS=mtu4096: the 64 KiB and 1 MiB rows at MTU 4096 only
# (SEND, WRITE, and READ as the control), for a change that shows only
# with page-sized payloads; meant for BENCH_REPS of 10 or more.
ROWS=${BENCH_AB_ROWS:-all}
case $ROWS in
all | lat | read | mtu4096) ;;
*) echo "BENCH_AB_ROWS=$ROWS: all, lat, read or mtu4096"; exit 1 ;;
esac
if [ "$ROWS" = mtu4096 ]; then
	for prog in ib_send_bw ib_write_bw ib_read_bw; do
		for size in 65536 1048576; do
			for qps in 1 4; do
				ab $prog $size bw 4096 $qps
			done
		done
	done
	use A
	bench_teardown
	exit 0
fi
if [ "$ROWS" = read ]; then
	for size in 65536 1048576; do
		for mtu in 1024 4096; do
			for qps in 1 4; do
				ab ib_read_bw $size bw $mtu $qps
			done
		done
	done
	ab ib_read_bw 64 bw 1024 1
	ab ib_read_bw 4096 bw 1024 1
	ab ib_read_lat 2 lat 1024 1
	ab ib_read_lat 4096 lat 1024 1
	use A
	bench_teardown
	exit 0
fi
if [ "$ROWS" = all ]; then
	for prog in ib_send_bw ib_write_bw ib_read_bw; do
		for size in 65536 1048576; do
			for mtu in 1024 4096; do
				for qps in 1 4; do
					ab $prog $size bw $mtu $qps
				done
			done
		done
	done
else
	ab ib_read_bw 64 bw 1024 1
	ab ib_send_bw 64 bw 1024 1
fi
for prog in ib_read_bw ib_send_bw ib_write_bw; do
	ab $prog 4096 bw 1024 1
done
ab ib_write_bw 64 bw 1024 1
for prog in ib_send_lat ib_write_lat ib_read_lat; do
	ab $prog 2 lat 1024 1
done
use A
bench_teardown
exit 0
