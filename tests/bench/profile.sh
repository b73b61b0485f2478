#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make profile, inside the VM: where the CPU time goes while rroce and
# rdma_rxe run the same perftest rows in the benchmark's topology. For each
# row and driver, perf samples every CPU (the cpu-clock software event: TCG
# has no PMU) for the whole client run, and the report is written to
# $RROCE_RUN/profile.txt: the share of samples per program and per binary,
# then the hottest kernel symbols (rroce's and rdma_rxe's from their
# modules). Without a PMU there is no NMI: a sample that falls due with
# interrupts off is taken when they come back on, so time spent with
# interrupts off shows up at the symbol that re-enables them
# (_raw_spin_unlock_irq*), not where it was spent. Under TCG an interrupt
# is taken only where a translated block starts, so a sample lands at the
# start of the block after the one it fell due in: a long straight block
# (the CRC's final folding) charges its time to the instruction after
# its return (crc32_le's "self" time is the CRC's). Each sample carries
# its call chain, so the report also lists inclusive shares: a function
# with everything it calls. Debian's perf (6.1) maps the second module
# wrongly: rdma_rxe's samples show up under the [rroce] binary with
# unresolved addresses, so rdma_rxe's own functions are missing from its
# list (rroce's, vmlinux's and user space's are right).
cd "$(dirname "$0")/../.." || exit 1
. tests/demo/netns.sh
. tests/bench/topology.sh
OUT=$RROCE_RUN/profile.txt
: >"$OUT"
command -v perf >/dev/null || { echo "perf is not installed (scripts/deps.sh)" >"$OUT"; exit 1; }
bench_topology || exit 1
echo -1 >/proc/sys/kernel/perf_event_paranoid
echo 0 >/proc/sys/kernel/kptr_restrict
TOP=${PROFILE_TOP:-30}

# counters DEV...: every hardware counter of the devices' port 1, one
# "dev name value" per line (rdma_rxe's are not per device here).
counters() {
	local d
	for d in "$@"; do
		rdma statistic show link "$d/1" 2>/dev/null | tr ' ' '\n' | grep -v '^$' |
			paste - - | awk -v d="$d" '$2 ~ /^[0-9]+$/ { print d, $1, $2 }'
	done
}

# diff_counters BEFORE: from "dev name value" lines on stdin (after), the
# ones that moved, as "dev name +delta".
diff_counters() {
	awk 'NR == FNR { v[$1 " " $2] = $3; next }
		$3 != v[$1 " " $2] { printf "%s %s +%d\n", $1, $2, $3 - v[$1 " " $2] }' "$1" -
}

# sleeps: how often each of rroce's receive threads went to sleep (its
# voluntary context switches; every sleep is a wake-up by the next packet
# or transmit handed to it), and the interprocessor interrupts that
# wake-ups and other CPUs' requests sent (rescheduling, function call),
# summed over the CPUs: "name count" per line.
sleeps() {
	local p
	for p in $(pgrep '^rroce_rx/'); do
		awk -v c="$(cat /proc/$p/comm)" '/^voluntary_ctxt_switches/ { print c, $2 }' /proc/$p/status
	done
	awk '$1 == "RES:" || $1 == "CAL:" { s = 0; for (i = 2; $i ~ /^[0-9]+$/; i++) s += $i; print $1, s }' /proc/interrupts
}

# diff_sleeps BEFORE MESSAGES: from "name count" lines on stdin (after),
# each one's increase, and per message.
diff_sleeps() {
	awk -v m="$2" 'NR == FNR { v[$1] = $2; next }
		{ d = $2 - v[$1]; printf "%s +%d (%.2f per message)\n", $1, d, d / m }' "$1" -
}

# row DRIVER PROG SIZE MTU QPS N
row() {
	local drv=$1 prog=$2 size=$3 mtu=$4 qps=$5 n=$6 sa sb dev0 dev1 ip v data opts
	bench_ends "$drv"
	data=/tmp/perf.$drv.data
	# The latency programs take no -q.
	opts="-m $mtu -s $size -n $n"
	[ "${prog%_lat}" != "$prog" ] || opts="$opts -q $qps"
	counters $dev0 $dev1 >/tmp/p.c0
	sleeps >/tmp/p.s0
	ip netns exec $sa timeout 120 $prog -d $dev0 $opts >/tmp/p.srv 2>&1 &
	wait_server $sa
	perf record -q -g -e cpu-clock -F 999 -a -o $data -- \
		ip netns exec $sb timeout 120 $prog -d $dev1 $opts $ip >/tmp/p.cli 2>&1
	wait
	sleeps >/tmp/p.s1
	if [ "${prog%_lat}" != "$prog" ]; then
		v=$(lat_field 5 /tmp/p.cli)
		v=${v:+$v usec typical}
	else
		v=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { v = $4 " MiB/s" } END { print v }' /tmp/p.cli)
	fi
	# perf report of this run, each symbol's own samples (no callers'
	# share, no call chains printed).
	report() { perf report -q -i $data --no-children -g none "$@"; }
	{
		echo "### $drv: $prog $opts: ${v:-FAILED}"
		echo
		echo '```'
		echo "-- by program"
		report --sort comm --stdio 2>/dev/null | grep -v '^$' | head -8
		echo "-- by CPU"
		report --sort cpu --stdio 2>/dev/null | grep -v '^$' | head -4
		echo "-- by binary"
		report --sort dso --stdio 2>/dev/null | grep -v '^$' | head -8
		echo "-- kernel symbols (share of all samples)"
		report --sort dso,sym --stdio --kallsyms=/proc/kallsyms 2>/dev/null |
			grep '\[k\]' | head -"$TOP" | sed -E 's/_RNv[A-Za-z0-9_]*10rroce_main/rroce::/'
		echo "-- kernel functions with all they call (inclusive share of all samples)"
		perf report -q -i $data --children -g none --sort sym --stdio --kallsyms=/proc/kallsyms 2>/dev/null |
			grep '\[k\]' | awk '$1 + 0 >= 0.5' | head -"$((TOP * 4))" | sed -E 's/_RNv[A-Za-z0-9_]*10rroce_main/rroce::/'
		echo "-- counters that moved (both ends; rroce's only)"
		counters $dev0 $dev1 | diff_counters /tmp/p.c0
		echo "-- receive threads' sleeps and IPIs (whole guest, setup included; per message of all QPs)"
		diff_sleeps /tmp/p.s0 "$((n * qps))" </tmp/p.s1
		echo "-- the driver's own functions"
		report --sort sym --stdio --kallsyms=/proc/kallsyms 2>/dev/null |
			grep -E '(rroce|rxe)' | head -15 | sed -E 's/_RNv[A-Za-z0-9_]*10rroce_main/rroce::/'
		echo '```'
		echo
	} >>"$OUT"
	rm -f $data
	echo "  $drv $prog $size mtu $mtu x$qps: ${v:-FAILED}"
}
# PROFILE_ROWS=small (make profile ROWS=small): the per-message rows
# instead, where the two drivers are within a few percent of each other
# in the TCG tables (64-byte WRITE and READ, the 2-byte WRITE and READ
# round trips), the 64 KiB READ at MTU 4096 (no faster than at MTU 1024)
# and the 4 KiB READ round trip (twice rdma_rxe's).
# PROFILE_ROWS=write (make profile ROWS=write): the WRITE rows short of the
# goal with one QP, 4 KiB at MTU 1024 and 64 KiB at MTU 4096.
# PROFILE_ROWS=read4 (make profile ROWS=read4): the 4-QP READ rows, short
# of the goal at both MTUs, 64 KiB at MTU 1024 and 1 MiB at MTU 4096.
for drv in rroce rxe; do
	case ${PROFILE_ROWS:-} in
	write)
		row $drv ib_write_bw 4096 1024 1 40000
		row $drv ib_write_bw 65536 4096 1 8000
		;;
	read4)
		row $drv ib_read_bw 65536 1024 4 4000
		row $drv ib_read_bw 1048576 4096 4 400
		;;
	small)
		# Each a few seconds under TCG: shorter, the profile is the
		# programs' start-up as much as the row.
		row $drv ib_write_bw 64 1024 1 200000
		row $drv ib_read_bw 64 1024 1 200000
		row $drv ib_read_bw 65536 4096 1 20000
		row $drv ib_write_lat 2 1024 1 100000
		row $drv ib_read_lat 2 1024 1 100000
		row $drv ib_read_lat 4096 1024 1 20000
		;;
	*)
		row $drv ib_send_bw 65536 1024 1 1500
		row $drv ib_send_bw 65536 1024 4 1500
		row $drv ib_write_lat 2 1024 1 2000
		;;
	esac
done
bench_teardown
exit 0
