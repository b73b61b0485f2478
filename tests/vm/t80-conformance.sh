#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The userspace NDKPI/ND2 conformance suite (tests/conformance/ndconf.c):
# every completion and queue-pair rule of ../shared/seeds/ that libibverbs
# can observe, over RC QP pairs in loopback on one device. Each rule is a
# check on rroce. The same suite then runs against the in-tree rdma_rxe in
# the same VM; its results are recorded (conformance-rxe.txt in the run
# directory) for Documentation/conformance.rst, not counted: where rxe
# differs from the rules is what rroce is for.
#
#   RROCE_CONFORMANCE_ITER   iterations of the poll-then-arm race (5000)
. tests/vm/lib.sh
. tests/demo/netns.sh

NDCONF=./build/tests/ndconf
ITER=${RROCE_CONFORMANCE_ITER:-5000}
OUT=${RROCE_RUN:-/tmp}

netns_setup || { fail conformance.netns "netns setup failed"; exit 0; }
check conformance.add ip netns exec ns0 rdma link add rroce0 type rroce netdev v0

# One check per test line: "ok   ID name: detail" / "FAIL ID name: detail".
ip netns exec ns0 timeout 1200 "$NDCONF" -d rroce0 -g 1 -n "$ITER" >"$OUT/conformance-rroce.txt" 2>&1
sed 's/^/    /' "$OUT/conformance-rroce.txt"
n=0
while read -r verdict id name rest; do
	case $verdict in
	ok) pass "conformance.$id.${name%:}"; n=$((n + 1)) ;;
	FAIL) fail "conformance.$id.${name%:}" "$rest"; n=$((n + 1)) ;;
	esac
done <"$OUT/conformance-rroce.txt"
want=$("$NDCONF" -l | wc -l)
if [ "$n" = "$want" ] && [ "$want" -gt 0 ]; then
	pass conformance.all_tests_reported
else
	fail conformance.all_tests_reported "$n results for $want tests"
fi
check conformance.del ip netns exec ns0 rdma link del rroce0

# The reference: the same suite on rdma_rxe (recorded, not counted).
if modprobe rdma_rxe && ip netns exec ns1 rdma link add rxe1 type rxe netdev v1; then
	# Not F2: invalidating a never-bound type-2 window dereferences a NULL
	# pointer in rdma_rxe 7.3 (rxe_do_invalidate_mw); its result there is
	# recorded by hand in Documentation/conformance.rst.
	ip netns exec ns1 timeout 1200 "$NDCONF" -d rxe1 -g 1 -n "$ITER" -x F2 >"$OUT/conformance-rxe.txt" 2>&1
	echo "    rdma_rxe: $(tail -1 "$OUT/conformance-rxe.txt")"
	grep '^FAIL' "$OUT/conformance-rxe.txt" | sed 's/^/    rxe: /'
	check conformance.rxe_suite_ran grep -qE '^[0-9]+ passed, [0-9]+ failed$' "$OUT/conformance-rxe.txt"
	ip netns exec ns1 rdma link del rxe1
else
	fail conformance.rxe_suite_ran "could not create an rdma_rxe device"
fi
netns_teardown
for _ in $(seq 20); do rmmod rdma_rxe 2>/dev/null && break; sleep 0.5; done
exit 0
