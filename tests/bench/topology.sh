# SPDX-License-Identifier: GPL-2.0
# The benchmark's topology, shared by tests/bench/guest.sh (the table) and
# tests/bench/profile.sh (the profile): two namespaces over a veth pair each,
# ns0/ns1 for rroce (rroce0, rroce1), ns2/ns3 for rdma_rxe (rxe0, rxe1),
# since one namespace cannot host both on UDP 4791; veth MTU 9000, so path
# MTU 4096 rows have room (every run names its path MTU with -m, so the
# netdev MTU is only a ceiling).

pair() { # NS_A NS_B IF_A IF_B NET
	ip netns add "$1" && ip netns add "$2" &&
		ip link add "$3" type veth peer name "$4" &&
		ip link set "$3" netns "$1" && ip link set "$4" netns "$2" &&
		ip -n "$1" addr add "$5.1/24" dev "$3" && ip -n "$2" addr add "$5.2/24" dev "$4" &&
		ip -n "$1" link set lo up && ip -n "$2" link set lo up &&
		ip -n "$1" link set "$3" up && ip -n "$2" link set "$4" up
}

# rroce_devices add|del: the rroce pair on the veths of ns0 and ns1 (also
# between runs, to swap the module under them: tests/bench/ab.sh).
rroce_devices() {
	if [ "$1" = add ]; then
		ip netns exec ns0 rdma link add rroce0 type rroce netdev v0 &&
			ip netns exec ns1 rdma link add rroce1 type rroce netdev v1
	else
		# Both, whatever the first did (as a teardown must).
		local first
		ip netns exec ns0 rdma link del rroce0
		first=$?
		ip netns exec ns1 rdma link del rroce1 && [ $first = 0 ]
	fi
}

bench_topology() {
	local ns
	for ns in ns0 ns1 ns2 ns3; do ip netns del $ns 2>/dev/null; done
	pair ns0 ns1 v0 v1 192.0.2 || return 1
	pair ns2 ns3 v2 v3 198.51.100 || return 1
	rroce_devices add || return 1
	modprobe rdma_rxe || return 1
	ip netns exec ns2 rdma link add rxe0 type rxe netdev v2 || return 1
	ip netns exec ns3 rdma link add rxe1 type rxe netdev v3 || return 1
	for ns in ns0:v0 ns1:v1 ns2:v2 ns3:v3; do
		ip -n "${ns%%:*}" link set "${ns##*:}" mtu 9000 || return 1
	done
	sleep 1
}

bench_teardown() {
	local ns
	rroce_devices del
	ip netns exec ns2 rdma link del rxe0
	ip netns exec ns3 rdma link del rxe1
	for ns in ns0 ns1 ns2 ns3; do ip netns del $ns; done
}

# bench_ends DRIVER: sets sa sb (server and client namespaces), dev0 dev1
# (their devices) and ip (the server's address) for rroce or rxe.
bench_ends() {
	if [ "$1" = rroce ]; then
		sa=ns0 sb=ns1 dev0=rroce0 dev1=rroce1 ip=192.0.2.1
	else
		sa=ns2 sb=ns3 dev0=rxe0 dev1=rxe1 ip=198.51.100.1
	fi
}

# wait_server NS: until the perftest server in NS listens for the
# out-of-band TCP handshake (a fixed sleep was sometimes too short under
# TCG).
wait_server() {
	for _ in $(seq 50); do
		ip netns exec "$1" ss -ltnH 2>/dev/null | grep -q ':18515\b' && return 0
		sleep 0.1
	done
}

# bench_iters SIZE KIND QPS: sets n (iterations per QP) and opts (perftest's
# iteration options) for a row. Bandwidth in iteration mode, sized to about
# a second of transfer under TCG on the benchmark kernel (0.5 to 4 s from
# the fastest driver's row to the slowest), the same bytes whatever the QP
# count (-n is per QP): in duration mode (-D) perftest counts only
# completions polled inside its sample window, cq_mod (100) messages per
# CQE, so at TCG speeds a 1 MiB row needs 100 MiB done inside the window or
# reads 0. Shorter runs (the table's first sizes: 0.1-0.4 s) were within a
# few scheduler ticks of the run's start-up, when the two perftest
# processes may still share a CPU. Latency: 5000 round trips (0.3-1.2 s);
# with 300 (about 15 ms) the typical measured the start as much as the
# driver (rroce's 2-byte WRITE latency 47-54 us against 26-31 with 5000,
# same boot).
bench_iters() {
	if [ "$2" = bw ]; then
		case $1 in
		64) n=16000 ;; 4096) n=4000 ;; 65536) n=1200 ;; *) n=96 ;;
		esac
		n=$((n / $3))
		opts="-n $n -q $3"
	else
		n=5000
		opts="-n $n"
	fi
}

# lat_field N [FILE]: field N of perftest's latency result line ("size iters
# min max typical avg ..."; 3: the minimum, 5: the typical) in FILE (the
# client's output, /tmp/bench.cli by default); nothing if there is none.
lat_field() {
	awk -v f="$1" '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+/ { v = $f } END { print v }' "${2:-/tmp/bench.cli}"
}

# bench_why_failed LABEL: why the last bench_run failed, for the record,
# appended to the run directory's bench-failures.log. perftest's own
# complaints first: its error output is unbuffered and its results
# buffered, so a message such as the clock calibration's ("Correlation
# coefficient") lands above the lines the tail keeps.
bench_why_failed() {
	{
		echo "== $1"
		grep -ho "Correlation coefficient r^2: [0-9.]* < [0-9.]*\|Can't produce a report\|Failed[^:]*\|Couldn't [a-z ]*" /tmp/bench.cli /tmp/bench.srv | sed 's/^/perftest: /'
		tail -n 12 /tmp/bench.srv /tmp/bench.cli
	} >>"$RROCE_RUN/bench-failures.log"
}

# bench_run PROG SIZE KIND MTU QPS: one perftest run between the ends
# bench_ends chose (server in $sa, client in $sb); prints its figure
# (bandwidth: perftest's average MB/sec, which is MiB/s; latency: the
# typical, in microseconds), nothing if it failed. Sets n and opts as
# bench_iters does; the two sides' output stays in /tmp/bench.srv and
# /tmp/bench.cli.
bench_run() {
	local prog=$1 size=$2 kind=$3 mtu=$4 qps=$5 srv
	bench_iters "$size" "$kind" "$qps"
	ip netns exec "$sa" timeout 90 "$prog" -d "$dev0" -m "$mtu" -s "$size" $opts >/tmp/bench.srv 2>&1 &
	srv=$!
	wait_server "$sa"
	ip netns exec "$sb" timeout 90 "$prog" -d "$dev1" -m "$mtu" -s "$size" $opts "$ip" >/tmp/bench.cli 2>&1
	wait $srv
	# bw: "size iters peak avg msgrate" -> avg; lat: "size iters min max typical ..." -> typical
	if [ "$kind" = bw ]; then
		awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { v = $4 } END { print v }' /tmp/bench.cli
	else
		lat_field 5
	fi
}
