#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Interop with the in-tree rdma_rxe on the wire: rroce in ns0, rdma_rxe in
# ns1, joined by a veth pair. Both directions (rroce as server and as
# client): ibv_rc_pingpong and ibv_ud_pingpong with validation, perftest,
# samples/rroce_rc with one QP on each driver; again under 3% loss. The
# traffic is captured on the veth and checked: Wireshark's InfiniBand
# dissector finds no malformed packet, and every ICRC and opcode is valid
# (scripts/pcap-check.py).
. tests/vm/lib.sh
. tests/demo/netns.sh

netns_setup || { fail interop.netns "netns setup failed"; exit 0; }
check interop.rroce_add ip netns exec ns0 rdma link add rroce0 type rroce netdev v0
check interop.rxe_modprobe modprobe rdma_rxe
check interop.rxe_add ip netns exec ns1 rdma link add rxe1 type rxe netdev v1

CAP=$RROCE_RUN/interop.pcap
rm -f "$CAP"
# The first 40000 packets: the samples (every opcode) and the pingpongs
# come first; dissecting more costs minutes under TCG.
ip netns exec ns0 dumpcap -q -P -c 40000 -i v0 -f "udp port 4791" -w "$CAP" </dev/null >/tmp/dumpcap.log 2>&1 &
cap=$!
sleep 3

# run_pair NAME SERVER_DEV SERVER_NS CLIENT_DEV CLIENT_NS SERVER_IP PROG ARGS...
run_pair() {
	local sdev=$1 sns=$2 cdev=$3 cns=$4 sip=$5 prog=$6
	shift 6
	# perftest: -F, see t50 (calibration failures under TCG are not ours).
	case $prog in ib_*) set -- -F "$@" ;; esac
	ip netns exec "$sns" timeout 90 "$prog" -d "$sdev" "$@" >/tmp/io.srv 2>&1 &
	local srv=$!
	wait_listen "$sns"
	ip netns exec "$cns" timeout 90 "$prog" -d "$cdev" "$@" "$sip" >/tmp/io.cli 2>&1
	local rc=$? cli_rc=$?
	wait $srv || rc=1
	case $prog in
	ibv_*_pingpong)
		grep -q "bytes in" /tmp/io.cli || rc=1
		# Under loss (LOSSY=1, -n 20), see pingpong_verdict in lib.sh.
		[ $rc != 0 ] && [ "${LOSSY:-0}" = 1 ] && pingpong_verdict /tmp/io.srv /tmp/io.cli 20 && rc=0
		;;
	*) perftest_row /tmp/io.cli || rc=1 ;;
	esac
	if [ $rc != 0 ]; then
		grep -iE "fail|error|status|couldn" /tmp/io.srv | sed 's/^/server: /'
		grep -iE "fail|error|status|couldn" /tmp/io.cli | sed 's/^/client: /'
		# A client killed by the timeout prints no error: say where it was.
		echo "client exit $cli_rc, last line: $(tail -n 1 /tmp/io.cli)"
	fi
	return $rc
}
both() { # NAME PROG ARGS...: rroce serves rxe, then rxe serves rroce
	local name=$1
	shift
	check_retry "interop.$name.rroce_server" run_pair rroce0 ns0 rxe1 ns1 192.0.2.1 "$@"
	check_retry "interop.$name.rxe_server" run_pair rxe1 ns1 rroce0 ns0 192.0.2.2 "$@"
}
check interop.sample_rroce_requester timeout 120 ./build/samples/rroce_rc -a rroce0 -b rxe1 -g 1 -q
check interop.sample_rxe_requester timeout 120 ./build/samples/rroce_rc -a rxe1 -b rroce0 -g 1 -q
both pingpong ibv_rc_pingpong -g 1 -s 10000 -n 50 -c
both pingpong_ipv6 ibv_rc_pingpong -g 2 -s 3000 -n 50 -c
both ud_pingpong ibv_ud_pingpong -g 1 -s 1000 -n 100 -c
both uc_pingpong ibv_uc_pingpong -g 1 -s 10000 -n 50 -c
both srq_pingpong ibv_srq_pingpong -g 1 -s 4096 -n 50 -c
# The RDMA CM across drivers: the CM's MADs between rroce's and rdma_rxe's
# GSI QPs, then rping's RC traffic with data verification.
modprobe rdma_ucm 2>/dev/null
rping_pair() { # SERVER_NS SERVER_ADDR CLIENT_NS
	ip netns exec "$1" timeout 60 rping -s -a "$2" -C 10 -V >/tmp/rping.srv 2>&1 &
	local srv=$!
	sleep 2
	ip netns exec "$3" timeout 60 rping -c -a "$2" -C 10 -V -v >/tmp/rping.cli 2>&1
	local rc=$?
	wait $srv || rc=1
	[ "$(grep -c 'ping data: rdma-ping-' /tmp/rping.cli)" = 10 ] || rc=1
	[ $rc = 0 ] || tail -n 5 /tmp/rping.srv /tmp/rping.cli
	return $rc
}
check interop.rping.rroce_server rping_pair ns0 192.0.2.1 ns1
check interop.rping.rxe_server rping_pair ns1 192.0.2.2 ns0
# UD multicast from rroce to rdma_rxe. Not the other way: rdma_rxe 7.3 as
# the sender puts only the first of mckey's datagrams on the wire (seen in
# a capture on the veth), so an rroce receiver waits for the rest.
. tests/vm/mckey.sh
check interop.mckey.rroce_sender mckey_pair ns1 192.0.2.2 ns0 192.0.2.1 239.1.2.3
both send_bw ib_send_bw -n 300 -s 65536
both write_bw ib_write_bw -n 300 -s 65536
both read_bw ib_read_bw -n 300 -s 65536
both atomic_bw ib_atomic_bw -n 300
both send_bw_srq ib_send_bw --use-srq -n 300 -s 65536
both write_lat ib_write_lat -n 200 -s 2

ip netns exec ns1 tc qdisc add dev v1 root netem loss 3% &&
	ip netns exec ns0 tc qdisc add dev v0 root netem loss 3%
LOSSY=1 both pingpong_loss ibv_rc_pingpong -g 1 -s 100000 -n 20 -c
both send_bw_loss ib_send_bw -n 100 -s 65536
both read_bw_loss ib_read_bw -n 100 -s 65536
check interop.sample_under_loss timeout 180 ./build/samples/rroce_rc -a rroce0 -b rxe1 -g 1 -q -l
check interop.sample_under_loss_rxe_requester timeout 180 ./build/samples/rroce_rc -a rxe1 -b rroce0 -g 1 -q -l
ip netns exec ns1 tc qdisc del dev v1 root
ip netns exec ns0 tc qdisc del dev v0 root

sleep 1
kill -INT $cap 2>/dev/null
wait $cap
check interop.capture_not_empty test -s "$CAP"
dissected() {
	local n bad payload
	n=$(tshark -r "$CAP" -Y infiniband 2>/dev/null | wc -l)
	# A malformation inside the InfiniBand headers leaves "infiniband" as
	# the last protocol; one in a payload dissector Wireshark guessed from
	# the data bytes (RPC-over-RDMA, an EtherType, ...) does not, and says
	# nothing about the RoCEv2 packet.
	# RoCEv2 over IPv6 carries a zero UDP checksum (as rdma_rxe and RoCE
	# NICs send it; the ICRC protects the packet), which Wireshark flags
	# as a checksum-group error: that group is not counted.
	tshark -r "$CAP" -Y '_ws.malformed || (_ws.expert.severity >= 8388608 && _ws.expert.group != 16777216)' \
		-T fields -e frame.protocols 2>/dev/null >/tmp/malformed.txt
	bad=$(awk -F: '$NF == "infiniband" || !/infiniband/' /tmp/malformed.txt | wc -l)
	payload=$(awk -F: '$NF != "infiniband" && /infiniband/' /tmp/malformed.txt | wc -l)
	echo "$n packets dissected as InfiniBand; $bad malformed in the RoCEv2 headers;" \
		"$payload payloads that Wireshark's payload heuristics misread"
	[ "$n" -gt 0 ] && [ "$bad" = 0 ]
}
check interop.wireshark_dissects_clean dissected
check interop.icrc_and_opcodes_valid /usr/bin/python3 scripts/pcap-check.py "$CAP"
# rroce sent runs of packets as UDP GSO packets (the veth takes them), and
# every segment of every run checked above, as rdma_rxe took them.
gso_runs() {
	/usr/bin/python3 scripts/pcap-check.py "$CAP" | tail -1 | tee /dev/stderr |
		grep -qE 'in [1-9][0-9]* UDP GSO packets'
}
check interop.rroce_sends_gso_runs gso_runs

check interop.rroce_del ip netns exec ns0 rdma link del rroce0
check interop.rxe_del ip netns exec ns1 rdma link del rxe1
netns_teardown
# rdma_rxe keeps its sockets until the namespace is gone; unload it so
# later tests start clean.
for _ in $(seq 20); do rmmod rdma_rxe 2>/dev/null && break; sleep 0.5; done
exit 0
