#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The demo, inside the VM: two namespaces over veth, an rroce device on each
# side, the stock rdma-core looking at them, then ib_send_bw and ib_write_lat
# between the namespaces.
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
say() { printf '\n### %s\n' "$*"; }
run() { echo "+ $*"; "$@"; }

say "kernel $(uname -r); rroce module:"
grep '^rroce ' /proc/modules || { echo "rroce is not loaded"; exit 1; }
say "network: two namespaces joined by a veth pair"
netns_setup || { echo "netns setup failed"; exit 1; }
run ip -n ns0 -br addr show v0
run ip -n ns1 -br addr show v1

say "rroce: one RDMA device per side"
run ip netns exec ns0 rdma link add rroce0 type rroce netdev v0 || exit 1
run ip netns exec ns1 rdma link add rroce1 type rroce netdev v1 || exit 1
run rdma link
run ibv_devices
ibv_devinfo -d rroce0 -v | grep -E 'hca_id|node_guid|vendor_id|max_qp:|max_cqe|state|active_mtu|link_layer|GID\['

say "rroce: verbs objects through the stock rdma-core (samples/rroce_objects)"
ip netns exec ns0 ./build/samples/rroce_objects -d rroce0 || exit 1

rc1=0 rc2=0
DEV0=rroce0 DEV1=rroce1
say "ib_send_bw: $DEV1 (ns1) -> $DEV0 (ns0)"
ip netns exec ns0 ib_send_bw -F -d "$DEV0" -n 2000 -s 65536 >/tmp/srv.out 2>&1 &
sleep 2
ip netns exec ns1 ib_send_bw -F -d "$DEV1" -n 2000 -s 65536 192.0.2.1 || rc1=$?
wait
say "ib_write_lat: $DEV1 (ns1) -> $DEV0 (ns0)"
ip netns exec ns0 ib_write_lat -F -d "$DEV0" -n 1000 >/tmp/srv.out 2>&1 &
sleep 2
ip netns exec ns1 ib_write_lat -F -d "$DEV1" -n 1000 192.0.2.1 || rc2=$?
wait
say "cleanup"
ip netns exec ns0 rdma link del "$DEV0"; ip netns exec ns1 rdma link del "$DEV1"
netns_teardown
[ $rc1 = 0 ] && [ $rc2 = 0 ]
