#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: set up if needed, boot the VM, measure rroce and rdma_rxe in
# the same boot (tests/bench/guest.sh), then print the table and write it to
# bench/results/ with the kernel, the CPU and whether the VM ran under KVM
# or TCG. Speed targets are read from this table, never asserted by tests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"
scripts/deps.sh
scripts/build-kernel.sh
scripts/build-module.sh
make -s samples
mkdir -p "$RROCE_CACHE/vmrun" bench/results
RUN=$(mktemp -d "$RROCE_CACHE/vmrun/bench.XXXXXX")
export RROCE_VM_RUNDIR=$RUN
scripts/vm.sh --timeout "${RROCE_BENCH_TIMEOUT:-3600}" 'bash tests/bench/guest.sh' | tee "$RUN/log"
[ -s "$RUN/bench.csv" ] || die "the benchmark produced no results (see $RUN)"
accel=$(cat "$RUN/accel" 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
kver=$(cat "$RROCE_CACHE/src/VERSION" 2>/dev/null || echo unknown)
out=bench/results/$(date -u +%Y-%m-%d)-$kver-$accel.md
/usr/bin/python3 scripts/bench-table.py "$RUN/bench.csv" "$kver" "$cpu" "$accel" | tee "$out"
echo "written to $out"
