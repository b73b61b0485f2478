#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A UD send doorbell returns after bounded work while the same process keeps
# its mapped send queue full (tests/hostile/ud_doorbell.c): the kernel must not keep
# sending for as long as the process keeps publishing.
. tests/vm/lib.sh

klog_mark ud_doorbell
prog=build/tests/ud_doorbell
[ -x $prog ] || { fail ud_doorbell.build "$prog missing (make samples)"; exit 0; }
# A dummy netdev in this namespace (no namespace churn): GID 1 is its
# IPv4 address, datagrams to it loop back through lo.
ip link add t42d type dummy && ip addr add 198.51.100.42/24 dev t42d &&
	ip link set t42d up || { fail ud_doorbell.netdev "dummy netdev setup failed"; exit 0; }
check ud_doorbell.add rdma link add rroce42 type rroce netdev t42d
$prog rroce42 1 10 >/tmp/t42.db 2>&1 &
pid=$!
# The program's own limit is 10 s; a doorbell that never returns is caught
# here, after 30 s.
for _ in $(seq 60); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
if kill -0 $pid 2>/dev/null; then
	fail ud_doorbell.bounded "the doorbell had not returned after 30 s: $(cat /tmp/t42.db)"
	# Without the rewriting thread the kernel drains the ring and returns.
	kill -9 $pid
	wait $pid 2>/dev/null
else
	wait $pid
	rc=$?
	sed 's/^/    /' /tmp/t42.db
	if [ $rc = 0 ]; then
		pass ud_doorbell.bounded
	else
		fail ud_doorbell.bounded "exit $rc: $(tail -2 /tmp/t42.db | tr '\n' ' ')"
	fi
fi
check ud_doorbell.usable_after timeout 60 ./build/samples/rroce_rc -a rroce42 -b rroce42 -g 1 -q
check ud_doorbell.del rdma link del rroce42
ip link del t42d
klog_clean ud_doorbell ud_doorbell.kernel_clean
exit 0
