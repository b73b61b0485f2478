#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench, inside the VM: rroce and rdma_rxe side by side, same boot, same
# topology (two namespaces over a veth pair each: ns0/ns1 for rroce, ns2/ns3
# for rdma_rxe, since one namespace cannot host both on UDP 4791), same
# perftest options, interleaved run by run. Writes one CSV line per run to
# $RROCE_RUN/bench.csv: driver,test,size,mtu,qps,rep,value,cpu_s,bytes,min
# (min: a latency run's minimum, empty otherwise)
# (value in MiB/s, perftest's "MB/sec", or usec; cpu_s the busy CPU-seconds
# of the whole guest during the run, from /proc/stat; bytes the payload the
# bandwidth run moved).
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
. tests/bench/topology.sh
REPS=${BENCH_REPS:-5}
[ -n "$REPS" ] || REPS=5
OUT=$RROCE_RUN/bench.csv
: >"$OUT"

bench_topology || exit 1

# The guest CPU model as the drivers see it: the carry-less multiply and
# AVX2 the arch-optimised CRC32 uses, and the 256-bit carry-less multiply
# that would make it fold twice the bytes per instruction (QEMU 7.2's TCG
# has no VPCLMULQDQ).
{
	grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' | tr -d '\n'
	for f in pclmulqdq vpclmulqdq avx2; do
		grep -qw $f /proc/cpuinfo && printf ' +%s' $f || printf ' -%s' $f
	done
	echo
} >"$RROCE_RUN/guest-cpu"

# The ceilings. memcpy: glibc in user space. kcopy: the guest kernel
# copying page-cache pages to user memory (dd from a tmpfs file to
# /dev/null, one kernel copy per byte), the copy a software RDMA device
# makes: MiB/s, the best of three reads of 256 MiB.
echo "memcpy,memcpy,0,0,0,1,$(./build/samples/memcpy_bw),," >>"$OUT"
K=/run/rroce-kcopy
mkdir -p $K && mount -t tmpfs -o size=300m tmpfs $K
head -c $((256 << 20)) /dev/zero >$K/f
kc=0
for _ in 1 2 3; do
	v=$(dd if=$K/f of=/dev/null bs=1M 2>&1 | awk '/copied/ { printf "%.1f", $1 / $(NF - 3) / 1048576 }')
	kc=$(awk -v a="$kc" -v b="${v:-0}" 'BEGIN { print (b > a) ? b : a }')
done
umount $K
echo "kcopy,kcopy,0,0,0,1,$kc,," >>"$OUT"
echo "  kernel copy rate: $kc MiB/s"

# Busy jiffies (USER_HZ) of all CPUs: user nice system irq softirq steal.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# one DRIVER PROG SIZE KIND MTU QPS REP
one() {
	local drv=$1 prog=$2 size=$3 kind=$4 mtu=$5 qps=$6 rep=$7 sa sb dev0 dev1 ip opts v n=0 b0 b1
	bench_ends "$drv"
	b0=$(busy)
	v=$(bench_run "$prog" "$size" "$kind" "$mtu" "$qps")
	b1=$(busy)
	bench_iters "$size" "$kind" "$qps"
	local cpu bytes=
	cpu=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.2f", (b - a) / 100 }')
	[ "$kind" = bw ] && bytes=$((size * n * qps))
	# Latency: also the run's minimum (perftest's t_min), its fast mode.
	local min=
	[ "$kind" = lat ] && [ -n "$v" ] &&
		min=$(lat_field 3)
	echo "$drv,$prog,$size,$mtu,$qps,$rep,${v:-fail},$cpu,$bytes,$min" >>"$OUT"
	[ -n "$v" ] || bench_why_failed "$drv $prog $size mtu $mtu x$qps #$rep"
	echo "  $drv $prog $size mtu $mtu x$qps #$rep: ${v:-FAILED} (${cpu} CPU-s)"
}
# both PROG SIZE KIND MTU QPS: every repetition, rroce and rxe interleaved.
both() {
	local rep
	for rep in $(seq "$REPS"); do
		one rroce "$@" "$rep"
		one rxe "$@" "$rep"
	done
}
for prog in ib_send_bw ib_write_bw ib_read_bw; do
	for size in 64 4096; do
		both $prog $size bw 1024 1
	done
	for size in 65536 1048576; do
		for mtu in 1024 4096; do
			for qps in 1 4; do
				both $prog $size bw $mtu $qps
			done
		done
	done
done
for prog in ib_send_lat ib_write_lat ib_read_lat; do
	for size in 2 4096; do
		both $prog $size lat 1024 1
	done
done
bench_teardown
exit 0
