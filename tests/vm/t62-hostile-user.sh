#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Hostile local user: the programs of tests/hostile/ run as an unprivileged
# user (uid 65534, no groups, no capabilities) on world-accessible
# /dev/infiniband/uverbs* (Debian's default) and attack rroce through their
# own uverbs mappings: garbage WQEs, CQ indices ahead/behind/wild, resize
# and ERR and destroy mid-traffic, abrupt exits, a READ racing a dereg and
# the reuse of its rkey by another PD, and indices held so that the kernel
# would loop forever. Meanwhile an honest process (samples/rroce_rc) keeps
# using the same two devices and must pass every run; afterwards the kernel
# log must be clean. The f2 case (index loops) runs last: before its fix it
# may spin with interrupts off.
. tests/vm/lib.sh
. tests/demo/netns.sh

OUT=${RROCE_RUN:-/tmp}
exec 3>&1
netns_setup || { fail hostile_user.netns "netns setup failed"; exit 0; }
check hostile_user.add0 ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check hostile_user.add1 ip netns exec ns1 rdma link add rroce1 type rroce netdev v1
klog_mark hostile_user

# The VM has no udev: make uverbs world-accessible as Debian's rule does,
# and put the programs where uid 65534 can run them.
chmod 0666 /dev/infiniband/uverbs*
BIN=/tmp/hostile-bin
mkdir -p $BIN
cp build/tests/hostile_user build/tests/hostile_f3 build/samples/rroce_rc $BIN/
chmod 0755 $BIN $BIN/*
# As nobody, without groups or capabilities. MR pinning is charged to
# RLIMIT_MEMLOCK, which root raises first (an administrator's choice, not a
# privilege of the attacker).
ulimit -l unlimited
UNPRIV=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all)
# run NAME SECS CMD...: CMD's whole output goes to the console and to
# $OUT/hu-NAME.log; what check shows on failure is its FAIL lines. A hang
# is cut by timeout (exit 124).
run() {
	local name=$1 secs=$2 rc
	shift 2
	timeout -k 10 "$secs" "$@" >"$OUT/hu-$name.log" 2>&1
	rc=$?
	sed 's/^/    /' "$OUT/hu-$name.log" >&3
	[ $rc = 124 ] && echo "timed out after $secs s (a verb never returned)"
	grep -E 'FAIL|passed,' "$OUT/hu-$name.log" | tail -4
	return $rc
}
A=rroce1 B=rroce0 G=1	# GID 1 is the IPv4 address (netns.sh)

# Catches: the unprivileged setup itself failing (then the cases below
# would test nothing).
check hostile_user.runs_unprivileged "${UNPRIV[@]}" sh -c \
	'[ "$(id -u)" = 65534 ] && ibv_devinfo -d rroce0 | grep -q PORT_ACTIVE'

# e. The honest process: rroce_rc (data and status checks) in a loop on
# the same two devices while the attacks b, c, d run. Catches: any attack
# disturbing another process's QPs, CQs or MRs, or stalling the device.
rm -f /tmp/hu.stop /tmp/hu.honest.*
softnet_drops() {
	local _ d
	while read -r _ d _; do printf '%d ' "0x$d"; done </proc/net/softnet_stat
}
softnet_drops >/tmp/hu.softnet0
honest_loop() {
	local n=0 f=0
	while [ ! -e /tmp/hu.stop ]; do
		if timeout $((180 * SLOW)) $BIN/rroce_rc -a rroce0 -b rroce1 -g $G -q >/tmp/hu.honest.last 2>&1; then
			n=$((n + 1))
		else
			f=$((f + 1))
			# What the network did meanwhile: packets the receiving
			# CPU's backlog dropped (softnet_stat's second column, per
			# CPU) and the veth pair's counters.
			{
				cat /tmp/hu.honest.last
				echo "backlog drops per CPU, at the start: $(cat /tmp/hu.softnet0), now: $(softnet_drops)"
				ip -n ns0 -s link show v0
				ip -n ns1 -s link show v1
				rdma statistic show link rroce0/1
				rdma statistic show link rroce1/1
			} >/tmp/hu.honest.fail$f
		fi
		echo "$n $f" >/tmp/hu.honest.count
	done
}
honest_loop &
honest_pid=$!

# b. Garbage WQEs. Catches: a bad send/receive WQE completing successfully,
# never completing, completing twice, or a completion nobody posted.
check hostile_user.garbage_wqes run garbage 600 "${UNPRIV[@]}" $BIN/hostile_user garbage -a $A -b $B -g $G -n 90

# c. CQ consumer index ahead / backwards / wild under traffic. Catches: a
# verb that never returns (watchdog), destroy failing, the device unusable
# for the same process afterwards.
check hostile_user.cq_consumer_index run cqidx 300 "${UNPRIV[@]}" $BIN/hostile_user cqidx -a $A -b $B -g $G

# c. Resize CQ, ERR and destroy in the middle of traffic. Catches: a CQE
# lost, duplicated or invented by a resize, something other than success
# or flush after ERR, destroy failing with work in flight.
check hostile_user.resize_err_destroy_midway run midway 300 "${UNPRIV[@]}" $BIN/hostile_user midway -a $A -b $B -g $G

# c. Abrupt exit: children _exit() or are SIGKILLed mid-traffic. Catches: a
# child stuck in the kernel (not dead within 30 s), the device unusable
# afterwards, and (below) objects left behind by the dead processes.
check hostile_user.abrupt_exit run abrupt 400 "${UNPRIV[@]}" $BIN/hostile_user abrupt -a $A -b $B -g $G -n 12
sleep 2
leaks() {
	local n=0 t c
	for t in qp cq mr pd; do
		c=$(rdma resource show $t 2>/dev/null | grep -c 'comm hostile_user')
		n=$((n + c))
		[ "$c" = 0 ] || echo "$c $t objects of dead hostile_user processes"
	done
	[ $n = 0 ]
}
check hostile_user.abrupt_exit_no_leak leaks

# d. F3: cross-PD READ after the rkey's reuse. The program checks the
# requester's buffer; the wire is checked here with a capture filter for
# RoCEv2 payloads starting with 0x22 0x22 0x22 0x22 (after the BTH, or
# BTH + AETH), sent by the responder (v0). A control packet from ns1 proves
# the filter matches. Catches: PD2's bytes (0x22) in a READ response.
f3_pcap=/tmp/hu-f3.pcapng
rm -f $f3_pcap
ip netns exec ns0 dumpcap -q -i v0 -w $f3_pcap \
	-f 'udp dst port 4791 and (udp[20:4] = 0x22222222 or udp[24:4] = 0x22222222)' \
	>/tmp/hu-dumpcap.log 2>&1 &
dumpcap_pid=$!
for _ in $(seq 50); do [ -s $f3_pcap ] && break; sleep 0.2; done
sleep 1
ip netns exec ns1 python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(bytes(12) + b"\x22" * 64, ("192.0.2.1", 4791))'
# On a KASAN kernel (about 1 MB/s) 32 READs of 16 MiB cannot finish within
# the program's 240 s watchdog: fewer, shorter READs there, still far
# longer than the re-registrations racing them.
f3_size=()
[ "$SLOW" = 1 ] || f3_size=(-s 2 -q 8)
check hostile_user.f3_cross_pd_read run f3 300 "${UNPRIV[@]}" $BIN/hostile_f3 -a $A -b $B -g $G "${f3_size[@]}"
sleep 1
kill -INT $dumpcap_pid 2>/dev/null
wait $dumpcap_pid 2>/dev/null
f3_wire() {
	local n
	n=$(tshark -r $f3_pcap 2>/dev/null | wc -l)
	tshark -r $f3_pcap 2>/dev/null | head -4
	[ "$n" -ge 1 ] || { cat /tmp/hu-dumpcap.log; echo "the control packet was not captured: the capture proves nothing"; return 1; }
	echo "$((n - 1)) READ response packets with PD2's bytes (0x22) on the wire"
	[ "$n" = 1 ]
}
check hostile_user.f3_no_pd2_bytes_on_wire f3_wire
f3_wire >"$OUT/hu-f3-wire.log" 2>&1

# e. The honest process kept working throughout the cases above. It is
# stopped before f2: anything else running on the attacker's CPU can stall
# the attacker (the first runs saw a flush end after exactly one ring).
touch /tmp/hu.stop
for _ in $(seq 200); do kill -0 $honest_pid 2>/dev/null || break; sleep 1; done
honest() {
	local n f
	read -r n f </tmp/hu.honest.count 2>/dev/null
	echo "honest rroce_rc runs: ${n:-0} passed, ${f:-0} failed"
	# A failed run's FAIL lines with the QP state rroce_rc printed after
	# each (retry budgets, what the QP waits for): enough to explain it.
	for x in /tmp/hu.honest.fail*; do
		[ -e "$x" ] || continue
		grep -A14 FAIL "$x" | head -40
		sed -n '/^backlog drops/,$p' "$x"
		cp "$x" "$OUT/hu-honest-${x##*.}.log"
	done
	[ "${n:-0}" -ge 1 ] && [ "${f:-0}" = 0 ]
}
check hostile_user.honest_process_kept_working honest
cat /tmp/hu.honest.count 2>/dev/null | sed 's/^/    honest runs passed, failed: /'

# a. F2 last: indices held so that a kernel loop re-reading them never
# ends. Catches: a verb (ERR, destroy, doorbell, resize, a peer's bad
# request) returning only once the attacker gives up (6 s), or never; a
# flush that consumes more than two rings' worth meanwhile.
check hostile_user.f2_index_loops run f2 300 "${UNPRIV[@]}" $BIN/hostile_user f2 -a $A -b $B -g $G -t 6
# e. And the honest process still works after it.
check hostile_user.honest_process_after_f2 timeout $((180 * SLOW)) $BIN/rroce_rc -a rroce0 -b rroce1 -g $G -q

# The kernel log since the devices came up. Catches: oopses, warnings,
# lockups and RCU stalls (an IRQs-off loop shows as a stall on the other
# CPU), hung tasks, KASAN reports.
klog_clean hostile_user hostile_user.kernel_log_clean

check hostile_user.del0 ip netns exec ns0 rdma link del rroce0
check hostile_user.del1 ip netns exec ns1 rdma link del rroce1
netns_teardown
exit 0
