#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Inside the VM: run rdma_rxe traffic between two namespaces over IPv4 and
# IPv6 GIDs and capture it on the veth with tshark into $1 (pcap).
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
OUT=$1
netns_setup || exit 1
modprobe rdma_rxe || exit 1
ip netns exec ns0 rdma link add rxe0 type rxe netdev v0 || exit 1
ip netns exec ns1 rdma link add rxe1 type rxe netdev v1 || exit 1
sleep 1
gid_index() { # DEV ADDR-SUFFIX
	for i in $(seq 0 15); do
		g=$(cat /sys/class/infiniband/$1/ports/1/gids/$i 2>/dev/null) || continue
		case "$g" in *"$2") echo "$i"; return ;; esac
	done
}
G4=$(gid_index rxe0 c000:0201); G6=$(gid_index rxe0 0000:0000:0000:0001)
echo "GID index IPv4 $G4, IPv6 $G6"
rm -f "$OUT"
ip netns exec ns1 dumpcap -q -P -a duration:150 -i v1 -w /tmp/cap.pcap </dev/null >/tmp/dumpcap.log 2>&1 &
cap=$!
sleep 3
pp() { # GID_INDEX
	ip netns exec ns0 timeout 30 ibv_rc_pingpong -d rxe0 -g "$1" -n 3 -s 100 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	ip netns exec ns1 timeout 30 ibv_rc_pingpong -d rxe1 -g "$1" -n 3 -s 100 192.0.2.1 | tail -1
	wait $srv
}
perf() { # TOOL GID_INDEX
	ip netns exec ns0 timeout 30 "$1" -d rxe0 -x "$2" -n 5 -s 300 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	ip netns exec ns1 timeout 30 "$1" -d rxe1 -x "$2" -n 5 -s 300 192.0.2.1 >/dev/null; echo "$1 gid $2: $?"
	wait $srv
}
pp "$G4"; pp "$G6"
perf ib_write_bw "$G4"; perf ib_read_bw "$G6"
sleep 2
pkill -INT -x dumpcap
for _ in $(seq 20); do kill -0 $cap 2>/dev/null || break; sleep 1; done
kill -KILL $cap 2>/dev/null
cat /tmp/dumpcap.log; cp /tmp/cap.pcap "$OUT" && ls -la "$OUT"
