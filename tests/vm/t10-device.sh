#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The RDMA device: rdma link add/del on veth and dummy netdevs, what the stock
# rdma-core (librxe) sees, netdev events, misuse.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail device.netns "netns setup failed"; exit 0; }
N0="ip netns exec ns0"

check device.link_add $N0 rdma link add rroce0 type rroce netdev v0
check device.link_active sh -c "rdma link show rroce0/1 | grep -q 'state ACTIVE physical_state LINK_UP'"
check device.ibv_devices sh -c "ibv_devices | grep -q rroce0"
devinfo() { ibv_devinfo -d rroce0 -v; }
check device.devinfo_ethernet sh -c "ibv_devinfo -d rroce0 -v | grep -q 'link_layer:.*Ethernet'"
check device.devinfo_active sh -c "ibv_devinfo -d rroce0 | grep -q 'state:.*PORT_ACTIVE'"
check device.devinfo_guid sh -c "ibv_devinfo -d rroce0 | grep -q 'node_guid:.*ff:fe'"

# GID table: RoCE v2 entries for the netdev's IPv4 and IPv6 addresses.
gid_has() { # ADDR_PATTERN
	local p=/sys/class/infiniband/rroce0/ports/1
	for i in $(seq 0 15); do
		g=$(cat $p/gids/$i 2>/dev/null) || continue
		t=$(cat $p/gid_attrs/types/$i 2>/dev/null)
		[ "$t" = "RoCE v2" ] && [ "$g" = "$1" ] && return 0
	done
	echo "no RoCE v2 GID $1 in:"; paste $p/gids/* 2>/dev/null | head; return 1
}
check device.gid_ipv4 gid_has 0000:0000:0000:0000:0000:ffff:c000:0201
check device.gid_ipv6 gid_has 2001:0db8:0000:0000:0000:0000:0000:0001
check device.query_gid_verbs sh -c "ibv_devinfo -d rroce0 -v | grep -q 'GID\[.*::ffff:192.0.2.1, RoCE v2'"

# What rxe also exposes: the parent netdev in sysfs, a node description
# that can be written (modify_device), the port events flag.
check device.sysfs_parent sh -c "[ \"\$(cat /sys/class/infiniband/rroce0/parent)\" = v0 ]"
node_desc() {
	echo "rroce test node" >/sys/class/infiniband/rroce0/node_desc &&
		[ "$(cat /sys/class/infiniband/rroce0/node_desc)" = "rroce test node" ] &&
		ibv_devinfo -d rroce0 -v | grep -q 'PORT_ACTIVE_EVENT'
}
check device.node_desc_and_port_events node_desc

# Misuse: a second device on the same netdev, a netdev that does not exist.
expect_fail device.second_add_refused $N0 rdma link add rroce9 type rroce netdev v0
expect_fail device.missing_netdev_refused $N0 rdma link add rroce9 type rroce netdev nosuchdev

# Netdev events.
port_state() { ibv_devinfo -d rroce0 | grep -q "state:.*$1"; }
ip -n ns0 link set v0 down
check device.link_down_seen port_state PORT_DOWN
ip -n ns0 link set v0 up
sleep 1
check device.link_up_seen port_state PORT_ACTIVE
ip -n ns0 link set v0 mtu 4200
check device.mtu_4096 sh -c "ibv_devinfo -d rroce0 | grep -q 'active_mtu:.*4096'"
ip -n ns0 link set v0 mtu 1500
check device.mtu_1024 sh -c "ibv_devinfo -d rroce0 | grep -q 'active_mtu:.*1024'"

check device.link_del $N0 rdma link del rroce0
check device.gone_after_del sh -c "! ibv_devices | grep -q rroce0"

# Any Ethernet-like netdev: a dummy device; deleting the netdev removes rroce.
ip link add dum0 type dummy && ip link set dum0 up
check device.dummy_add rdma link add rroce1 type rroce netdev dum0
ip link del dum0
sleep 1
check device.gone_with_netdev sh -c "! rdma link | grep -q rroce1"

exit 0
