#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The RC transport between two namespaces over veth, rroce on both sides:
# samples/rroce_rc (data and status of every operation and error path) over
# IPv4 and IPv6, again under 3% packet loss, ibv_rc_pingpong with data
# validation, and the perftest programs make demo and the benchmark use.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail rc.netns "netns setup failed"; exit 0; }
check rc.add0 ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check rc.add1 ip netns exec ns1 rdma link add rroce1 type rroce netdev v1

# GID 1 is the IPv4 address, GID 2 the global IPv6 one (netns.sh).
sample() { timeout 120 ./build/samples/rroce_rc "$@"; }
check rc.sample_ipv4 sample -a rroce1 -b rroce0 -g 1
check rc.sample_ipv6 sample -a rroce0 -b rroce1 -g 2
# Loopback: both QPs on one device; the IP stack delivers on lo.
check rc.sample_loopback_ipv4 sample -a rroce0 -b rroce0 -g 1 -q
check rc.sample_loopback_ipv6 sample -a rroce1 -b rroce1 -g 2 -q

# ibv_rc_pingpong validates the buffers (--chk); sizes beyond the MTU.
pingpong() {
	ip netns exec ns0 timeout 60 ibv_rc_pingpong -d rroce0 -g "$1" -s "$2" -n 50 -c >/tmp/pp.srv 2>&1 &
	sleep 1
	ip netns exec ns1 timeout 60 ibv_rc_pingpong -d rroce1 -g "$1" -s "$2" -n 50 -c 192.0.2.1 >/tmp/pp.cli 2>&1
	local rc=$?
	wait $! || rc=1
	grep -q "bytes in" /tmp/pp.cli || rc=1
	[ $rc = 0 ] || cat /tmp/pp.srv /tmp/pp.cli
	return $rc
}
check rc.pingpong_4k pingpong 1 4096
check rc.pingpong_100k pingpong 2 100000

# perftest: each must finish and report a non-zero result line.
perf() {
	local prog=$1
	shift
	ip netns exec ns0 timeout 90 "$prog" -d rroce0 "$@" >/tmp/perf.srv 2>&1 &
	sleep 1
	ip netns exec ns1 timeout 90 "$prog" -d rroce1 "$@" 192.0.2.1 >/tmp/perf.cli 2>&1
	local rc=$?
	wait $! || rc=1
	# The result row starts with the message size.
	awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { found = 1 } END { exit !found }' /tmp/perf.cli || rc=1
	[ $rc = 0 ] || tail -n 8 /tmp/perf.srv /tmp/perf.cli
	return $rc
}
check rc.ib_send_bw perf ib_send_bw -n 500 -s 65536
check rc.ib_write_bw perf ib_write_bw -n 500 -s 65536
check rc.ib_read_bw perf ib_read_bw -n 500 -s 65536
check rc.ib_atomic_bw perf ib_atomic_bw -n 500
check rc.ib_send_lat perf ib_send_lat -n 200 -s 2
check rc.ib_write_lat perf ib_write_lat -n 200 -s 2
check rc.ib_read_lat perf ib_read_lat -n 200 -s 4096
check rc.ib_write_bw_ipv6 perf ib_write_bw -n 200 -s 4096 -x 2

# Packet loss: retransmission and go-back-N keep the data intact.
ip -n ns1 link set v1 mtu 1500
tc -n ns1 qdisc add dev v1 root netem loss 3% 2>/dev/null &&
	tc -n ns0 qdisc add dev v0 root netem loss 3% 2>/dev/null
if tc -n ns1 qdisc show dev v1 | grep -q netem; then
	check rc.sample_under_loss sample -a rroce1 -b rroce0 -g 1 -q
	check rc.pingpong_under_loss pingpong 1 100000
	tc -n ns1 qdisc del dev v1 root
	tc -n ns0 qdisc del dev v0 root
else
	fail rc.netem "tc netem is not available in the test kernel"
fi

check rc.del0 ip netns exec ns0 rdma link del rroce0
check rc.del1 ip netns exec ns1 rdma link del rroce1
netns_teardown
exit 0
