#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Verbs objects through the stock rdma-core: samples/rroce_objects opens the
# device with librxe and creates, uses, misuses and destroys PD, MR, AH, CQ
# (ring mapped into the process), then checks the kernel is left clean.
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail objects.netns "netns setup failed"; exit 0; }
ip netns exec ns0 rdma link add rroce0 type rroce netdev v0 || { fail objects.link_add "rdma link add failed"; exit 0; }

out=$(ip netns exec ns0 ./build/samples/rroce_objects -d rroce0 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
# One check per sample step, so a failure names the step.
while IFS= read -r line; do
	case "$line" in
	"  ok  "*) pass "objects.$(echo "${line#  ok   }" | tr -cs 'a-zA-Z0-9' '_' | cut -c1-60)" ;;
	"  FAIL "*) fail "objects.$(echo "${line#  FAIL }" | tr -cs 'a-zA-Z0-9' '_' | cut -c1-60)" "sample step failed" ;;
	esac
done <<<"$out"
[ $rc = 0 ] || fail objects.sample_exit "rroce_objects exited $rc"

# Nothing left behind: the RDMA core's resource tracker holds no object
# of rroce0 that a process owns. (The MAD layer's own PD, MR, CQ and GSI QP
# stay; the tracker shows a pid only for user owners.)
no_user_objects() {
	! { rdma resource show cq; rdma resource show mr; rdma resource show pd; } 2>/dev/null |
		grep rroce0 | grep -q ' pid '
}
check objects.no_leftover_resources no_user_objects

# The process dies with objects open: the core cleans up through rroce's
# destroy ops.
ip netns exec ns0 sh -c './build/samples/rroce_objects -d rroce0 >/dev/null & sleep 0.2; kill -9 $! 2>/dev/null; wait' 2>/dev/null
check objects.cleanup_after_kill no_user_objects
ip netns exec ns0 rdma link del rroce0
netns_teardown
exit 0
