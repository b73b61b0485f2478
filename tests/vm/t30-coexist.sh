#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Coexistence with the in-tree rdma_rxe (same driver id, RDMA_DRIVER_RXE):
# both drivers at once in different namespaces, netdev events on rroce's
# netdev while rdma_rxe is loaded, a second driver on the same netdev, and
# rmmod rdma_rxe with rroce devices alive (they are unregistered with it,
# because rdma_rxe's exit unregisters every device of its driver id).
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail coexist.netns "netns setup failed"; exit 0; }
check coexist.rroce_add ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check coexist.rxe_modprobe modprobe rdma_rxe
check coexist.rxe_add ip netns exec ns1 rdma link add rxe1 type rxe netdev v1
check coexist.both_listed sh -c "ibv_devices | grep -q rroce0 && ibv_devices | grep -q rxe1"
check coexist.rroce_active sh -c "ibv_devinfo -d rroce0 | grep -q PORT_ACTIVE"
check coexist.rxe_active sh -c "ibv_devinfo -d rxe1 | grep -q PORT_ACTIVE"

# Events on rroce's netdev must reach rroce only (rdma_rxe would otherwise
# treat rroce's device as its own).
ip -n ns0 link set v0 mtu 4200
check coexist.mtu_event_rroce sh -c "ibv_devinfo -d rroce0 | grep -q 'active_mtu:.*4096'"
ip -n ns0 link set v0 down
check coexist.down_event_rroce sh -c "ibv_devinfo -d rroce0 | grep -q PORT_DOWN"
ip -n ns0 link set v0 up
check coexist.rxe_unaffected sh -c "ibv_devinfo -d rxe1 | grep -q PORT_ACTIVE"
check coexist.objects_on_rroce ip netns exec ns0 ./build/samples/rroce_objects -d rroce0

# rroce refuses a netdev that already has an rdma_rxe device.
expect_fail coexist.rroce_on_rxe_netdev_refused ip netns exec ns1 rdma link add rroce9 type rroce netdev v1
# UDP port 4791 has one owner per network namespace: rroce cannot add a
# device where rdma_rxe listens (and says why), rdma_rxe cannot where rroce
# does; rroce's device keeps working.
ip -n ns1 link add dum9 type dummy && ip -n ns1 link set dum9 up
logged=$(dmesg | wc -l)
expect_fail coexist.rroce_refused_in_rxe_namespace ip netns exec ns1 rdma link add rroce9 type rroce netdev dum9
check coexist.port_conflict_explained sh -c "dmesg | tail -n +$((logged + 1)) | grep -q 'cannot bind UDP port 4791'"
expect_fail coexist.rxe_refused_in_rroce_namespace ip netns exec ns0 rdma link add rxe9 type rxe netdev v0
check coexist.rroce_unaffected_by_refused_rxe ip netns exec ns0 ./build/samples/rroce_objects -d rroce0
check coexist.rxe_del2 ip netns exec ns1 rdma link del rxe1

# Unloading rdma_rxe unregisters every RDMA_DRIVER_RXE device, rroce's too
# (rdma_rxe's own devices pin it through their UDP sockets, so they were
# deleted first).
check coexist.rxe_rmmod rmmod rdma_rxe
check coexist.rroce_removed_with_rxe sh -c "! rdma link | grep -q rroce0"
check coexist.rroce_still_usable ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check coexist.rroce_del ip netns exec ns0 rdma link del rroce0
netns_teardown
exit 0
