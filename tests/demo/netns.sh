# SPDX-License-Identifier: GPL-2.0
# Two network namespaces joined by a veth pair: ns0/v0 192.0.2.1, 2001:db8::1
# and ns1/v1 192.0.2.2, 2001:db8::2 (documentation ranges; the traffic never
# leaves the VM). Source it; netns_setup / netns_teardown.

netns_setup() {
	netns_teardown
	ip netns add ns0 && ip netns add ns1 &&
	ip link add v0 type veth peer name v1 &&
	ip link set v0 netns ns0 && ip link set v1 netns ns1 &&
	ip -n ns0 addr add 192.0.2.1/24 dev v0 && ip -n ns1 addr add 192.0.2.2/24 dev v1 &&
	ip -n ns0 addr add 2001:db8::1/64 dev v0 nodad && ip -n ns1 addr add 2001:db8::2/64 dev v1 nodad &&
	ip -n ns0 link set lo up && ip -n ns1 link set lo up &&
	ip -n ns0 link set v0 up && ip -n ns1 link set v1 up
}

netns_teardown() {
	ip netns del ns0 2>/dev/null
	ip netns del ns1 2>/dev/null
	return 0
}
