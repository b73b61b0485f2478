#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the VM (rroce.ko already inserted by vm.sh, so its KUnit suites
# have run): every tests/vm/t*.sh in order, then unloads rroce. Checks are
# recorded in $RROCE_RUN/checks for the host-side driver. RROCE_VM_TESTS
# (names like "t50-rc t60-hostile") runs only those scripts.
cd "$(dirname "$0")/../.." || exit 1
. tests/vm/lib.sh
: >"$CHECKS"
TIMES=()
for t in tests/vm/t[0-9]*.sh; do
	if [ -n "${RROCE_VM_TESTS:-}" ] && [[ " $RROCE_VM_TESTS " != *" $(basename "$t" .sh) "* ]]; then
		continue
	fi
	echo "== $t"
	t0=$SECONDS
	bash "$t" || fail "$(basename "$t" .sh)" "script exited $?"
	TIMES+=("$(basename "$t" .sh) $((SECONDS - t0))s")
done
# Where the guest's time went (the check's length is mostly this part).
echo "== times: ${TIMES[*]}"
echo "== unload"
if module_loaded rroce; then
	check module.rmmod rmmod rroce
	check module.devices_gone_after_rmmod sh -c "! rdma link | grep -q rroce"
fi
if [ -f /tmp/hold.unload.pid ]; then
	# The process that held objects across the unload exits normally.
	pid=$(cat /tmp/hold.unload.pid)
	for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
	sed 's/^/    /' /tmp/hold.unload
	check module.unload_under_live_process grep -q "hold: done" /tmp/hold.unload
fi
ip netns del ns0 2>/dev/null
ip netns del ns1 2>/dev/null
ip link del dum1 2>/dev/null
exit 0
