#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Hostile packets: short, bad ICRC, unknown opcode, no such QP, truncated
# headers, bad pad. Each is counted in the right `rdma statistic` counter
# and dropped; the device keeps working afterwards.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail hostile.netns "netns setup failed"; exit 0; }
check hostile.add0 ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check hostile.add1 ip netns exec ns1 rdma link add rroce1 type rroce netdev v1

counter() { rdma statistic show link rroce0/1 | grep -o "$1 [0-9]*" | awk '{print $2}'; }
inject() { ip netns exec ns1 /usr/bin/python3 tests/vm/roce_inject.py 2001:db8::2 2001:db8::1 "$@"; }
# expect_count NAME CASE COUNTER: one packet of CASE raises COUNTER by one.
expect_count() {
	local before after
	before=$(counter "$3")
	inject "$2"
	sleep 0.3
	after=$(counter "$3")
	if [ -n "$before" ] && [ "$after" = $((before + 1)) ]; then
		pass "$1"
	else
		fail "$1" "$3 went from '$before' to '$after'"
	fi
}
check hostile.statistic_lists_counters sh -c "rdma statistic show link rroce0/1 | grep -q rcvd_bad_icrc"
expect_count hostile.short_counted short rcvd_malformed
expect_count hostile.bad_icrc_counted bad_icrc rcvd_bad_icrc
expect_count hostile.bad_opcode_counted bad_opcode rcvd_malformed
expect_count hostile.no_qp_counted no_qp rcvd_no_qp
expect_count hostile.truncated_header_counted truncated_reth rcvd_malformed
expect_count hostile.bad_pad_counted bad_pad rcvd_malformed
for c in short bad_icrc bad_opcode no_qp truncated_reth bad_pad; do inject $c 300; done
check hostile.device_still_works timeout 120 ./build/samples/rroce_rc -a rroce1 -b rroce0 -g 2 -q
check hostile.del0 ip netns exec ns0 rdma link del rroce0
check hostile.del1 ip netns exec ns1 rdma link del rroce1
netns_teardown
exit 0
