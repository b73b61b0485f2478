#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Leave rroce devices in place (on a veth in a namespace and on a dummy
# device): run-all.sh then unloads the module, which must unregister them
# cleanly. A process holding the device open must make rmmod refuse.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup
ip netns exec ns0 rdma link add rroce2 type rroce netdev v0 || fail unload.setup "add on v0 failed"
ip link add dum1 type dummy && ip link set dum1 up && rdma link add rroce3 type rroce netdev dum1 ||
	fail unload.setup "add on dum1 failed"

# An open user context pins the module.
ip netns exec ns0 sh -c 'exec 3</dev/infiniband/uverbs0; sleep 3' &
holder=$!
sleep 1
expect_fail unload.refused_while_open rmmod rroce
wait $holder
check unload.devices_present sh -c "rdma link | grep -q rroce2 && rdma link | grep -q rroce3"
exit 0
