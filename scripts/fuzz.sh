#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fuzzes the RoCEv2 packet parser (fuzz/fuzz_targets/parse_packet.rs) with
# libFuzzer for SECONDS seconds (default 600), then prints how many inputs it
# ran. Exits non-zero if the fuzzer found a crash; the input that caused it is
# left under fuzz/artifacts/parse_packet/.
#
# usage: scripts/fuzz.sh [SECONDS]
#
# cargo-fuzz needs nightly-only rustc flags (-Zsanitizer, sanitizer coverage);
# the pinned stable toolchain accepts them with RUSTC_BOOTSTRAP=1. The target
# is built with AddressSanitizer and debug assertions (so arithmetic overflow
# panics); if the ASan runtime is unavailable it falls back to no sanitizer.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

SECS=${1:-600}
TARGET=parse_packet
case $SECS in
'' | *[!0-9]*) die "usage: $0 [SECONDS]" ;;
esac

if ! command -v cargo-fuzz >/dev/null; then
	log "installing cargo-fuzz with cargo"
	cargo install --locked cargo-fuzz || die "cannot install cargo-fuzz"
fi
export RUSTC_BOOTSTRAP=1
cd "$RROCE_ROOT/fuzz" || die "no fuzz/ directory"

SAN=${RROCE_FUZZ_SANITIZER:-address}
if ! cargo fuzz build --sanitizer "$SAN" --debug-assertions "$TARGET"; then
	[ "$SAN" != none ] || die "cannot build the fuzz target"
	log "building with sanitizer '$SAN' failed; retrying without a sanitizer"
	SAN=none
	cargo fuzz build --sanitizer none --debug-assertions "$TARGET" ||
		die "cannot build the fuzz target"
fi

# Seed the corpus with the transport part (BTH onwards) of the ICRC
# known-answer packets, behind an MTU selector byte (see the target).
CORPUS=corpus/$TARGET
mkdir -p "$CORPUS"
if [ -z "$(ls -A "$CORPUS")" ] && command -v python3 >/dev/null; then
	python3 - "$RROCE_ROOT/src/engine/icrc.rs" "$CORPUS" <<-'EOF'
		import re, sys
		src, out = open(sys.argv[1]).read(), sys.argv[2]
		for name, body in re.findall(r'\("([\w-]+)", &\[(.*?)\]\)', src, re.S):
		    pkt = bytes(int(x, 16) for x in re.findall(r'0x([0-9a-f]{2})', body))
		    udp = pkt[48:] if pkt[0] >> 4 == 6 else pkt[28:]
		    for sel in (0, 66):  # no MTU; MTU 1024
		        open(f'{out}/seed-{name}-{sel}', 'wb').write(bytes([sel]) + udp)
	EOF
fi

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
log "fuzzing $TARGET for ${SECS}s (sanitizer: $SAN)"
cargo fuzz run --sanitizer "$SAN" --debug-assertions "$TARGET" "$CORPUS" -- \
	-max_total_time="$SECS" -timeout=10 -print_final_stats=1 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOG" | tail -1)
secs=$(sed -n 's/^stat::.*//; s/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$LOG" | tail -1)
echo "executions: ${execs:-unknown}"
if [ -n "$execs" ] && [ -n "$secs" ] && [ "$secs" -gt 0 ]; then
	echo "executions per second: $((execs / secs))"
fi
if [ "$rc" != 0 ]; then
	echo "fuzzer failed (exit $rc); reproducer in fuzz/artifacts/$TARGET/" >&2
fi
exit "$rc"
