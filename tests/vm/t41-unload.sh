#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Module unload while the RDMA core is still removing a device on its own:
# a netdev went away just before rmmod (the core's work queue unregisters
# the device and calls rroce's dealloc_driver), and unload itself makes the
# netdev notifier queue the rest. Exit must wait for every such callback to
# return: the test build's test_dealloc_delay_ms holds each one open, and
# the callback's "slept" line must come before "rroce: unloaded". rmmod
# starts once the deleted netdevs' callbacks are already sleeping.
# Then the registry full (64 devices) and unloaded so. Reloads the module
# (with KUnit's module-load run filtered out) after each unload.
. tests/vm/lib.sh

P=/sys/module/rroce/parameters/test_dealloc_delay_ms
G=/sys/module/kunit/parameters/filter_glob
if [ ! -w $P ]; then
	fail unload.fence.param "$P missing: the module was built without CONFIG_KUNIT"
	exit 0
fi
glob=$(cat $G 2>/dev/null)
[ "$glob" = "(null)" ] && glob="*"
[ -w $G ] && echo "rroce_none_at_reload" >$G

# unload_round NAME N-DELETED N-KEPT: N-DELETED devices whose netdev is
# deleted right before rmmod, N-KEPT left for the unload.
unload_round() {
	local name=$1 del=$2 keep=$3 i n=$(($2 + $3))
	for i in $(seq 0 $((n - 1))); do
		ip link add dumu$i type dummy && ip link set dumu$i up &&
			rdma link add rroceu$i type rroce netdev dumu$i ||
			{ fail "unload.$name.setup" "device $i"; return; }
	done
	echo 700 >$P
	klog_mark "unload_$name"
	for i in $(seq 0 $((del - 1))); do ip link del dumu$i; done
	# Unload only once the core's work queue is inside each deleted
	# device's callback (which has removed it from rroce's registry).
	for _ in $(seq 200); do
		[ "$(klog_since "unload_$name" | grep -c "dealloc_driver sleeps")" -ge "$del" ] && break
		sleep 0.05
	done
	check "unload.$name.rmmod" rmmod rroce
	check "unload.$name.devices_gone" sh -c "! rdma link | grep -q rroceu"
	local log
	log=$(klog_since "unload_$name")
	# Every held callback returned before the module went away.
	local slept unloaded
	slept=$(grep -c "rroce: test: dealloc_driver slept" <<<"$log")
	unloaded=$(grep -n "rroce: unloaded" <<<"$log" | head -1 | cut -d: -f1)
	last=$(grep -n "rroce: test: dealloc_driver slept" <<<"$log" | tail -1 | cut -d: -f1)
	if [ "$slept" = "$n" ] && [ -n "$unloaded" ] && [ "$last" -lt "$unloaded" ]; then
		pass "unload.$name.waits_for_dealloc"
	else
		fail "unload.$name.waits_for_dealloc" "$slept of $n callbacks returned, the last at log line ${last:-none}, unloaded at ${unloaded:-none}"
	fi
	klog_clean "unload_$name" "unload.$name.klog_clean"
	for i in $(seq $del $((n - 1))); do ip link del dumu$i 2>/dev/null; done
	check "unload.$name.reload" sh -c "insmod rroce.ko && grep -q '^rroce ' /proc/modules"
}

unload_round netdev_gone 1 0
unload_round mixed 2 2

# A full registry (64 devices): one more is refused with a clear error;
# a device removed and at once added again gets its entry back (a removed
# device's entry waits for the core to be done with it); unload removes
# them all.
full_table() {
	local have n i
	have=$(rdma link | grep -c "rroce" || true)
	n=$((64 - have))
	echo 0 >$P
	for i in $(seq 0 $((n - 1))); do
		ip link add dumf$i type dummy && ip link set dumf$i up &&
			rdma link add roff$i type rroce netdev dumf$i ||
			{ fail unload.full.setup "device $i of $n"; return; }
	done
	klog_mark unload_full
	ip link add dumf$n type dummy && ip link set dumf$n up
	expect_fail unload.full.one_more_refused rdma link add roff$n type rroce netdev dumf$n
	says_why() { klog_since unload_full | grep -q 'too many rroce devices'; }
	check unload.full.says_why says_why
	check unload.full.del_then_add sh -c "rdma link del roff0 && rdma link add roff0 type rroce netdev dumf0"
	check unload.full.rmmod rmmod rroce
	check unload.full.devices_gone sh -c "! rdma link | grep -q roff"
	for i in $(seq 0 $n); do ip link del dumf$i; done
	check unload.full.reload sh -c "insmod rroce.ko && grep -q '^rroce ' /proc/modules"
	klog_clean unload_full unload.full.klog_clean
}
full_table
[ -w $G ] && echo "$glob" >$G
exit 0
