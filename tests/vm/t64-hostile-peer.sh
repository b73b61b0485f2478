#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A hostile peer against live RC QPs. tests/hostile/peer_victim connects one
# RC QP pair per case between rroce0 (ns0, 2001:db8::1) and rroce1 (ns1,
# 2001:db8::2) and waits; tests/vm/roce_inject.py live, in ns1, sends
# packets with a valid ICRC at the victim QPs (right QPN, PSNs around the
# expected one): spoofed source (from 2001:db8::3) and destination (to
# 2001:db8::4), wrong P_Keys, duplicate READs/atomics never asked for, huge
# READs, out-of-sequence middles, pad/length lies, unsolicited responses,
# UD/UC opcodes, SEND with invalidate. Each case checks the victim
# device's counter deltas and the packets it sent back; then the victim
# checks nothing was delivered and honest traffic on the same QPs
# completes with correct data. The kernel log stays clean. All of it twice:
# the second round sends each packet with its UDP payload in a page
# fragment (hostile_peer_paged.*), so the receive path reads it in pieces.
. tests/vm/lib.sh
. tests/demo/netns.sh

R=${RROCE_RUN:-/tmp}
STATE=$R/hpeer.state
VOUT=$R/hpeer.victim
IOUT=$R/hpeer.inject
GO=$R/hpeer.go
klog_mark hostile_peer

netns_setup || { fail hostile_peer.netns "netns setup failed"; exit 0; }
check hostile_peer.spoof_addresses sh -c \
	"ip -n ns1 addr add 2001:db8::3/64 dev v1 nodad && ip -n ns0 addr add 2001:db8::4/64 dev v0 nodad"
check hostile_peer.add0 ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check hostile_peer.add1 ip netns exec ns1 rdma link add rroce1 type rroce netdev v1

# report FILE: turns the "CHECK ok|fail NAME[: why]" lines into checks.
report() {
	local status name why
	while read -r _ status name why; do
		name=${name%:}
		if [ "$status" = ok ]; then pass "$name"; else fail "$name" "$why"; fi
	done < <(grep '^CHECK ' "$1")
}

# One round: a fresh victim (new QPs, PSNs and MRs), every injector case,
# then the victim's own checks. TAG prefixes the check names; extra
# arguments go to the injector. The victim waits for a line on its
# standard input: "go" once $GO exists (a pipe from a subshell: the run
# directory may not hold a FIFO).
hostile_round() {
	local tag=$1 vpid vrc
	shift
	rm -f "$STATE" "$GO"
	(
		for _ in $(seq 2500); do [ -e "$GO" ] && break; sleep 0.2; done
		echo go
	) | ./build/tests/peer_victim -a rroce0 -A 2001:db8::1 -b rroce1 -B 2001:db8::2 -s "$STATE" \
		>"$VOUT" 2>&1 &
	vpid=$!
	for _ in $(seq 300); do
		grep -q READY "$VOUT" 2>/dev/null && break
		kill -0 $vpid 2>/dev/null || break
		sleep 0.2
	done
	if grep -q READY "$VOUT"; then
		pass "$tag.victim_ready"
		ip netns exec ns1 timeout 300 /usr/bin/python3 tests/vm/roce_inject.py live "$STATE" \
			--iface v1 --tag "$tag" "$@" >"$IOUT" 2>&1
		sed 's/^/    /' "$IOUT"
		report "$IOUT"
		grep -q '^injector:' "$IOUT" || fail "$tag.injector" "did not finish: $(tail -3 "$IOUT" | tr '\n' ' ')"
	else
		fail "$tag.victim_ready" "$(tail -5 "$VOUT" | tr '\n' ' ')"
	fi
	touch "$GO"
	for _ in $(seq 900); do kill -0 $vpid 2>/dev/null || break; sleep 0.5; done
	kill $vpid 2>/dev/null
	wait $vpid
	vrc=$?
	sed 's/^/    /' "$VOUT"
	# The victim names its checks hostile_peer.*.
	report <(sed "s/^CHECK \([a-z]*\) hostile_peer\./CHECK \1 $tag./" "$VOUT")
	if [ $vrc = 0 ]; then pass "$tag.victim_exit"; else fail "$tag.victim_exit" "exit status $vrc"; fi
	rm -f "$GO"
}

# Every packet in the skb layout the stack builds for a datagram (linear),
# then again with each packet's UDP payload in a page fragment, the layout
# real NICs deliver: the receive path reads it in place (rcvd_paged).
hostile_round hostile_peer
hostile_round hostile_peer_paged --paged

check hostile_peer.del0 ip netns exec ns0 rdma link del rroce0
check hostile_peer.del1 ip netns exec ns1 rdma link del rroce1
netns_teardown
klog_clean hostile_peer hostile_peer.kernel_log_clean
exit 0
