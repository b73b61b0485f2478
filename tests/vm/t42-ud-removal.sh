#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Netdev removal under traffic: the netdev goes away (ip link del) while a
# UD sender keeps posting (its datagrams are built after the device forgot
# its netdev) and, with netem delaying the veth, while RC READ responses and
# datagrams sit queued on their QPs. The kernel must neither oops nor hang;
# the processes see errors and exit.
. tests/vm/lib.sh
. tests/demo/netns.sh

sent() { rdma statistic show link "$1/1" 2>/dev/null | grep -o 'sent_pkts [0-9]*' | awk '{print $2+0}'; }

# removal NAME SETUP-CMD: two devices over veth, traffic started by the
# functions named in $traffic, then v1 (and with it v0) deleted.
removal() {
	local name=$1 pids=() n0
	klog_mark "ud_removal.$name"
	netns_setup || { fail "ud_removal.$name.netns" "netns setup failed"; return; }
	ip netns exec ns0 rdma link add rroce0 type rroce netdev v0 &&
		ip netns exec ns1 rdma link add rroce1 type rroce netdev v1 ||
		{ fail "ud_removal.$name.add" "rdma link add failed"; return; }
	[ -n "$2" ] && eval "$2"
	# UD: perftest's datagram sender posts as fast as it can.
	ip netns exec ns0 timeout 90 ib_send_bw -d rroce0 -c UD -s 512 -D 40 -F >/dev/null 2>&1 &
	pids+=($!)
	wait_listen ns0
	ip netns exec ns1 timeout 90 ib_send_bw -d rroce1 -c UD -s 512 -D 40 -F 192.0.2.1 >/dev/null 2>&1 &
	pids+=($!)
	if [ "$name" = netem ]; then
		# RC READs: response bursts are queued on the responder's QP.
		ip netns exec ns1 timeout 90 ib_read_bw -d rroce1 -p 18516 -s 65536 -D 40 -F >/dev/null 2>&1 &
		pids+=($!)
		wait_listen ns1
		ip netns exec ns0 timeout 90 ib_read_bw -d rroce0 -p 18516 -s 65536 -D 40 -F 192.0.2.2 >/dev/null 2>&1 &
		pids+=($!)
	fi
	# Wait for datagrams to flow (the handshake is slow under TCG).
	n0=$(sent rroce1)
	for _ in $(seq 60); do [ "$(sent rroce1)" -gt $((n0 + 200)) ] && break; sleep 0.5; done
	echo "    rroce1 sent_pkts $n0 -> $(sent rroce1)"
	check "ud_removal.$name.no_hang" timeout 120 ip -n ns1 link del v1
	check "ud_removal.$name.devices_gone" sh -c "sleep 2; ! rdma link | grep -qE 'rroce[01]/'"
	for _ in $(seq 60); do
		alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.5
	done
	kill -9 "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null
	netns_teardown
	klog_clean "ud_removal.$name" "ud_removal.$name.kernel_clean"
}

removal plain ""
removal netem "tc -n ns0 qdisc add dev v0 root netem delay 50ms && tc -n ns1 qdisc add dev v1 root netem delay 50ms"
exit 0
