#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Leave rroce devices in place (on a veth in a namespace and on a dummy
# device): run-all.sh then unloads the module, which must unregister them
# cleanly, even while a process holds objects with a mapped CQ ring (the
# RDMA core disassociates it; run-all.sh checks the process survives).
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup
ip netns exec ns0 rdma link add rroce2 type rroce netdev v0 || fail unload.setup "add on v0 failed"
ip link add dum1 type dummy && ip link set dum1 up && rdma link add rroce3 type rroce netdev dum1 ||
	fail unload.setup "add on dum1 failed"

check unload.devices_present sh -c "rdma link | grep -q rroce2 && rdma link | grep -q rroce3"
# A process holding objects on rroce2 across the unload.
ip netns exec ns0 ./build/samples/rroce_objects -d rroce2 -w 8 >/tmp/hold.unload 2>&1 &
echo $! >/tmp/hold.unload.pid
for _ in $(seq 20); do grep -q "holding" /tmp/hold.unload && break; sleep 0.5; done
exit 0
