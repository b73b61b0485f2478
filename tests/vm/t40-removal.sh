#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Device removal under a live process holding objects (PD, MR, CQ with its
# ring mapped): rdma link del and netdev removal must neither hang nor
# crash; the process sees errors afterwards and exits normally.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail removal.netns "netns setup failed"; exit 0; }

held_removal() { # NAME ADD-CMD REMOVE-CMD
	local name=$1 add=$2 remove=$3
	if ! eval "$add"; then fail "removal.$name.add" "$add failed"; return; fi
	ip netns exec ns0 ./build/samples/rroce_objects -d rroce7 -w 4 >/tmp/hold.$name 2>&1 &
	local holder=$!
	for _ in $(seq 20); do grep -q "holding" /tmp/hold.$name && break; sleep 0.5; done
	check "removal.$name.no_hang" timeout 60 sh -c "$remove"
	check "removal.$name.device_gone" sh -c "sleep 1; ! rdma link | grep -q rroce7"
	wait $holder
	local rc=$?
	sed 's/^/    /' /tmp/hold.$name
	if [ $rc = 0 ] && grep -q "hold: done" /tmp/hold.$name; then
		pass "removal.$name.process_survives"
	else
		fail "removal.$name.process_survives" "holder exit $rc: $(tail -2 /tmp/hold.$name | tr '\n' ' ')"
	fi
}

held_removal link_del "ip netns exec ns0 rdma link add rroce7 type rroce netdev v0" \
	"ip netns exec ns0 rdma link del rroce7"
ip -n ns0 link add dum7 type dummy && ip -n ns0 link set dum7 up
held_removal netdev_del "ip netns exec ns0 rdma link add rroce7 type rroce netdev dum7" \
	"ip -n ns0 link del dum7"
netns_teardown
exit 0
