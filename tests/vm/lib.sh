# SPDX-License-Identifier: GPL-2.0
# Helpers for the in-VM integration tests. Results go to $RROCE_RUN/checks, one
# line per check: "ok NAME" or "not ok NAME: reason"; the host counts them.

CHECKS=${RROCE_RUN:-/tmp}/checks

pass() { echo "ok $1" >>"$CHECKS"; echo "  ok   $1"; }
fail() { echo "not ok $1: $2" >>"$CHECKS"; echo "  FAIL $1: $2"; }

# check NAME CMD...: passes when CMD exits 0; its output is shown on failure.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "$(why_failed "$out")"
	fi
}

# why_failed OUTPUT: what a failed check reports, on one line: the
# program's FAIL lines (and the indented details after them) and its last
# line if it has any, else its last five lines.
why_failed() {
	if grep -q FAIL <<<"$1"; then
		awk '/FAIL/ { more = 1; print; next } more && /^    / { print; next } { more = 0 }' \
			<<<"$1" | head -n 24
		tail -n 1 <<<"$1"
	else
		tail -n 5 <<<"$1"
	fi | tr '\n' ' '
}

# expect_fail NAME CMD...: passes when CMD fails (misuse must be refused).
expect_fail() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "$name" "succeeded but should have failed: $(echo "$out" | tail -3 | tr '\n' ' ')"
	else
		pass "$name"
	fi
}

# SLOW: how many times longer a command takes on this guest than on the
# test kernel. A KASAN kernel checks every access: 8 MiB perftest runs move
# about 1 MB/s there, so timeouts of commands whose run time grows with the
# data they move are multiplied by it (`timeout $((90 * SLOW))`).
SLOW=1
[ "${RROCE_KASAN:-0}" = 1 ] && SLOW=5

# The kernel log's bad lines: one pattern (tests/klog-bad.re) for every
# check here and on the host. klog_mark NAME writes a marker line into the
# kernel log; klog_clean NAME CHECK passes CHECK when nothing after the
# last marker NAME matches (dmesg line counts shift when the buffer wraps,
# a marker does not).
KLOG_BAD_RE=tests/klog-bad.re
klog_mark() { echo "rroce-test: mark $1" >/dev/kmsg; }
klog_since() {
	dmesg | awk -v m="rroce-test: mark $1" '
		substr($0, length($0) - length(m) + 1) == m { n = NR }
		{ l[NR] = $0 }
		END { for (i = n + 1; i <= NR; i++) print l[i] }'
}
klog_clean() {
	local log bad
	log=$(klog_since "$1")
	bad=$(echo "$log" | grep -E -f "$KLOG_BAD_RE" | head -3)
	if [ -z "$bad" ]; then pass "$2"; return; fi
	# A rare splat must be diagnosable from the check's line alone (CI
	# keeps only that): add the first report's RIP and call-trace frames.
	fail "$2" "$(echo "$bad" | tr '\n' ' ')| $(echo "$log" | klog_frames)"
	echo "$log" | grep -E -A60 -m1 -f "$KLOG_BAD_RE" | sed 's/^/     | /'
}
# klog_frames: "RIP: f+0x1/0x2 < caller < ..." from the first report in
# stdin: its RIP and up to 24 call-trace frames ("?" guesses left out).
klog_frames() {
	awk -v re="$(cat "$KLOG_BAD_RE")" '
		!on && $0 ~ re { on = 1 }
		!on { next }
		/RIP: [0-9]+:/ && !rip { sub(/.*RIP: [0-9]+:/, ""); rip = $1; next }
		/Call Trace:/ { tr = 1; next }
		tr && /<\/?(IRQ|TASK|NMI|EOI)>/ { f = f " " $NF; next }
		tr && / \? / { next }
		tr && /[a-z_][a-z_0-9.]*\+0x[0-9a-f]+\/0x/ {
			s = $NF; if (s ~ /^\[/) s = $(NF - 1)
			f = f " < " s; if (++n >= 24) exit; next }
		tr { exit }
		END { printf "RIP: %s%s", rip, f }'
}

module_loaded() { grep -q "^$1 " /proc/modules; }

# wait_listen NS: until a TCP listener (a perftest/pingpong server's
# out-of-band port) is up in NS, at most 10 s.
wait_listen() {
	for _ in $(seq 50); do
		ip netns exec "$1" ss -ltnH 2>/dev/null | grep -qE ':(18515|18516|18517)\b' && return 0
		sleep 0.2
	done
	return 0
}

# check_retry NAME CMD...: like check, but a failure is retried once (for
# two-process runs whose out-of-band TCP handshake or timing is at the
# mercy of TCG). A pass on the retry says so in the check name's output.
# perftest_row FILE: FILE (a perftest client's output) has its result
# row: the message size, the iterations, then figures, which are "inf" or
# "-nan" when perftest's clock calibration failed (t50-rc.sh says when).
perftest_row() {
	awk '/^ *[0-9]+ +[0-9]+ +([0-9.]+|inf|-?nan)/ { f = 1 } END { exit !f }' "$1"
}

# pingpong_verdict SERVER_OUT CLIENT_OUT ITERS: whether an ibv_rc_pingpong
# pair run under packet loss did its job. Both sides finishing passes. So
# does one side failing with nothing but "transport retry counter
# exceeded" on its SEND (wr_id 2) while the other side finished every
# iteration: a side posts its next SEND only once the previous one
# completed and a message arrived, so the finished side received (and
# validated, -c) every message of the failed one, whose first N-1 SENDs
# therefore completed. What was lost is the ACK of its last SEND, after
# which the finished side exited and destroyed its QP, leaving its
# retransmissions unanswered: ibv_rc_pingpong has no closing handshake,
# and any RC device fails it this way now and then (at 3% loss in each
# direction, one run in about 60). A last ACK never sent would fail the
# lossless pingpongs every time.
pingpong_verdict() {
	local n=$3
	finished() { grep -q "^$n iters in " "$1"; }
	last_ack_lost() {
		grep -qx "Failed status transport retry counter exceeded (12) for wr_id 2" "$1" &&
			! grep -vE '^  (local|remote) address: |^Failed status transport retry counter exceeded \(12\) for wr_id 2$|^parse WC failed 2$' "$1" |
				grep -q .
	}
	finished "$1" && finished "$2" && return 0
	finished "$1" && last_ack_lost "$2" && return 0
	finished "$2" && last_ack_lost "$1" && return 0
	return 1
}

check_retry() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	elif out2=$("$@" 2>&1); then
		pass "$name"
		echo "       (passed on retry; first attempt: $(echo "$out" | tail -3 | tr '\n' ' '))"
	else
		fail "$name" "$(echo "$out2" | tail -5 | tr '\n' ' ')"
	fi
}
