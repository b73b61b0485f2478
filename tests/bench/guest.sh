#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench, inside the VM: rroce and rdma_rxe side by side, same boot, same
# topology (two namespaces over a veth pair each: ns0/ns1 for rroce, ns2/ns3
# for rdma_rxe, since one namespace cannot host both on UDP 4791), same
# perftest options, interleaved run by run. Writes one CSV line per run to
# $RROCE_RUN/bench.csv: driver,test,size,rep,value (MB/s or usec).
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
REPS=${BENCH_REPS:-3}
OUT=$RROCE_RUN/bench.csv
: >"$OUT"

pair() { # NS_A NS_B IF_A IF_B NET
	ip netns add "$1" && ip netns add "$2" &&
	ip link add "$3" type veth peer name "$4" &&
	ip link set "$3" netns "$1" && ip link set "$4" netns "$2" &&
	ip -n "$1" addr add "$5.1/24" dev "$3" && ip -n "$2" addr add "$5.2/24" dev "$4" &&
	ip -n "$1" link set lo up && ip -n "$2" link set lo up &&
	ip -n "$1" link set "$3" up && ip -n "$2" link set "$4" up
}
for ns in ns0 ns1 ns2 ns3; do ip netns del $ns 2>/dev/null; done
pair ns0 ns1 v0 v1 192.0.2 || exit 1
pair ns2 ns3 v2 v3 198.51.100 || exit 1
ip netns exec ns0 rdma link add rroce0 type rroce netdev v0 || exit 1
ip netns exec ns1 rdma link add rroce1 type rroce netdev v1 || exit 1
modprobe rdma_rxe || exit 1
ip netns exec ns2 rdma link add rxe0 type rxe netdev v2 || exit 1
ip netns exec ns3 rdma link add rxe1 type rxe netdev v3 || exit 1
sleep 1

echo "memcpy,memcpy,0,1,$(./build/samples/memcpy_bw)" >>"$OUT"

# one DRIVER PROG SIZE KIND REP
one() {
	local drv=$1 prog=$2 size=$3 kind=$4 rep=$5 sa sb dev0 dev1 ip opts v
	if [ "$drv" = rroce ]; then
		sa=ns0 sb=ns1 dev0=rroce0 dev1=rroce1 ip=192.0.2.1
	else
		sa=ns2 sb=ns3 dev0=rxe0 dev1=rxe1 ip=198.51.100.1
	fi
	# Bandwidth in iteration mode, sized to a few seconds under TCG: in
	# duration mode (-D) perftest counts only completions polled inside its
	# sample window, cq_mod (100) messages per CQE, so at TCG speeds a
	# 1 MiB row needs 100 MiB done inside the window or reads 0.
	if [ "$kind" = bw ]; then
		case $size in
		64) opts="-n 2000" ;; 4096) opts="-n 1000" ;; 65536) opts="-n 150" ;; *) opts="-n 12" ;;
		esac
	else
		opts="-n 300"
	fi
	ip netns exec $sa timeout 60 $prog -d $dev0 -s "$size" $opts >/tmp/b.srv 2>&1 &
	local srv=$!
	sleep 0.5
	ip netns exec $sb timeout 60 $prog -d $dev1 -s "$size" $opts $ip >/tmp/b.cli 2>&1
	wait $srv
	# bw: "size iters peak avg msgrate" -> avg; lat: "size iters min max typical ..." -> typical
	if [ "$kind" = bw ]; then
		v=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { v = $4 } END { print v }' /tmp/b.cli)
	else
		v=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+/ { v = $5 } END { print v }' /tmp/b.cli)
	fi
	echo "$drv,$prog,$size,$rep,${v:-fail}" >>"$OUT"
	echo "  $drv $prog $size #$rep: ${v:-FAILED}"
}
for prog in ib_send_bw ib_write_bw ib_read_bw; do
	for size in 64 4096 65536 1048576; do
		for rep in $(seq "$REPS"); do
			one rroce $prog $size bw "$rep"
			one rxe $prog $size bw "$rep"
		done
	done
done
for prog in ib_send_lat ib_write_lat ib_read_lat; do
	for size in 2 4096; do
		for rep in $(seq "$REPS"); do
			one rroce $prog $size lat "$rep"
			one rxe $prog $size lat "$rep"
		done
	done
done
ip netns exec ns0 rdma link del rroce0; ip netns exec ns1 rdma link del rroce1
ip netns exec ns2 rdma link del rxe0; ip netns exec ns3 rdma link del rxe1
for ns in ns0 ns1 ns2 ns3; do ip netns del $ns; done
exit 0
