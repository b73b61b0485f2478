#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: set up if needed, boot the VM, measure rroce and rdma_rxe in
# the same boot (tests/bench/guest.sh), then print the table and write it to
# bench/results/ with the kernel, the CPU and whether the VM ran under KVM
# or TCG. Speed targets are read from this table, never asserted by tests.
#
# The kernel is the benchmark kernel (kernel/bench.config: the test kernel
# without lockdep, atomic-sleep checks and KUnit, optimised for speed, with
# the arch-optimised CRC32), built and cached beside the test kernel on the
# first run (about 15 minutes). BENCH_KERNEL=test measures on the test
# kernel instead. rroce.ko for it is built from a copy of this tree, so the
# test kernel's rroce.ko here is left alone.
#
# UML=1 (make bench UML=1) runs the same table in User-Mode Linux
# (kernel/uml.config, scripts/uml.sh): the drivers then run at the host
# CPU's own speed, not under TCG.
#
# `scripts/bench.sh ab` (make bench-ab PARAM=NAME) runs rroce against itself
# with one boolean module parameter on and off (tests/bench/ab.sh); with
# BASE=COMMIT instead (make bench-ab BASE=HEAD~1), this tree's module
# against that commit's, built the same way, swapped between runs.
#
# `scripts/bench.sh profile` (make profile) boots the same kernel and module
# and writes a profile instead of the table (tests/bench/profile.sh): where
# the CPU time goes in a few of the table's rows, rroce and rdma_rxe. With
# UML=1 the host's perf samples the UML run (one row per driver).
set -euo pipefail
MODE=${1:-table}
# Before lib.sh: it picks the kernel from RROCE_BENCH.
if [ "${BENCH_KERNEL:-bench}" = bench ]; then
	export RROCE_BENCH=1
fi
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"
scripts/deps.sh
scripts/build-kernel.sh
if [ "$RROCE_BENCH" = 1 ] || [ "$RROCE_UML" = 1 ]; then
	M=$RROCE_CACHE/bench-module
	rm -rf "$M" && mkdir -p "$M"
	tar -C "$RROCE_ROOT" --exclude=./target --exclude=./build --exclude=./fuzz --exclude=./.git \
		--exclude=./bench --exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod*' \
		--exclude=./modules.order --exclude=./Module.symvers --exclude='*.rmeta' -cf - . |
		tar -C "$M" -xf -
	log "building rroce.ko for the benchmark kernel in $M"
	"$M/scripts/build-module.sh"
	export RROCE_MODULE=$M/rroce.ko
else
	scripts/build-module.sh
fi
make -s samples
mkdir -p "$RROCE_CACHE/vmrun" bench/results
# Under TCG the kernel's clocksource watchdog marks the TSC unstable a few
# minutes after boot (the vCPUs' clocks skew when the host deschedules
# them) and falls back to the HPET, every read of which is an emulated
# device access: rdma_rxe's work-queue scheduling then spent 10-14% of all
# samples in read_hpet, and perftest's clock reads leave the vDSO. A real
# machine keeps its TSC, so the benchmark says it is reliable.
export RROCE_VM_APPEND="${RROCE_VM_APPEND:+$RROCE_VM_APPEND }tsc=reliable"
RUN=$(mktemp -d "$RROCE_CACHE/vmrun/bench.XXXXXX")
export RROCE_VM_RUNDIR=$RUN
# The host's CPUs are kept out of their idle halt while the drivers run:
# this machine is itself a virtual machine whose idle CPUs halt into the
# hypervisor, and waking one costs tens of microseconds, which a latency
# row pays whenever its round trip wakes another host thread (a UML
# system call's hand-over to the virtual CPU's thread; a TCG vCPU thread
# woken for rdma_rxe's work items). A PM QoS CPU latency of 0
# (/dev/cpu_dma_latency, held open for the run, as a latency benchmark on
# real hardware runs with deep C-states off) makes them poll instead.
# BENCH_HOST_IDLE=default leaves the host as it is. The table says which.
host_idle="as configured (BENCH_HOST_IDLE=${BENCH_HOST_IDLE:-})"
if [ "${BENCH_HOST_IDLE:-poll}" = poll ]; then
	host_idle="as configured (/dev/cpu_dma_latency not writable)"
	if [ -w /dev/cpu_dma_latency ] && { exec 9>/dev/cpu_dma_latency; } 2>/dev/null &&
		printf 0 >&9 2>/dev/null &&
		[ "$(od -An -td4 -N4 /dev/cpu_dma_latency 2>/dev/null | tr -d ' ')" = 0 ]; then
		host_idle="polling (a PM QoS CPU latency of 0 held during the runs)"
	fi
fi
export BENCH_HOST_IDLE_NOTE=$host_idle
log "host CPUs when idle: $host_idle"
B=$(rroce_build_dir)
# What the table says about the kernel: the options that decide a driver
# comparison, as built.
# UML=1: the same table in User-Mode Linux, at the host CPU's speed.
RUNNER=scripts/vm.sh
if [ "$RROCE_UML" = 1 ]; then
	RUNNER=scripts/uml.sh
fi
kver=$(cat "$RROCE_CACHE/src/VERSION" 2>/dev/null || echo unknown)
# result_path WHAT: bench/results/DATE-KERNEL-WHAT.md, or, when a run
# of the same day already wrote that, the first free -2, -3, ...
result_path() {
	local base out n=2
	base=bench/results/$(date -u +%Y-%m-%d)-$kver-$1
	out=$base.md
	while [ -e "$out" ]; do
		out=$base-$n.md
		n=$((n + 1))
	done
	echo "$out"
}
kconf=$(for o in PROVE_LOCKING DEBUG_ATOMIC_SLEEP KUNIT CC_OPTIMIZE_FOR_PERFORMANCE CRC_OPTIMIZATIONS SLUB_TINY JUMP_LABEL; do
	if grep -q "^CONFIG_$o=y" "$B/.config"; then echo "$o=y"; else echo "$o=n"; fi
done | paste -sd' ')
if [ "$MODE" = profile ]; then
	how="tests/bench/profile.sh, which explains the method"
	if [ "$RROCE_UML" = 1 ]; then
		# UML has no perf events: the host's perf samples every host CPU
		# around the whole UML run (tests/bench/uml-profile.py explains).
		command -v perf >/dev/null || die "perf is not installed (scripts/deps.sh)"
		perf record -q -a -g -e cpu-clock -F 1999 -k CLOCK_REALTIME -o "$RUN/perf.data" -- \
			scripts/uml.sh --timeout 900 'bash tests/bench/uml-profile.sh' | tee "$RUN/log"
		perf script -i "$RUN/perf.data" --show-mmap-events -F comm,tid,time,ip,sym,dso >"$RUN/perf.script" 2>/dev/null
		/usr/bin/python3 tests/bench/uml-profile.py "$RUN" >"$RUN/profile.txt"
		how="tests/bench/uml-profile.sh and .py, which explain the method; host perf"
	else
		scripts/vm.sh --timeout 1800 'bash tests/bench/profile.sh' | tee "$RUN/log"
	fi
	[ -s "$RUN/profile.txt" ] || die "the profile produced nothing (see $RUN)"
	accel=$(cat "$RUN/accel" 2>/dev/null || echo unknown)
	out=$(result_path "profile-$accel")
	# UML's call chains: a flame graph per driver beside the table.
	svgs=
	for f in "$RUN"/*.svg; do
		[ -s "$f" ] || continue
		d=$(basename "$f" .svg)
		cp "$f" "${out%.md}-$d.svg"
		svgs="$svgs ${out%.md}-$d.svg"
	done
	{
		echo "# Where the time goes: rroce and rdma_rxe, $kver"
		echo
		kname="benchmark kernel"
		[ "$RROCE_UML" = 0 ] || kname="UML kernel"
		echo "Kernel: $kver, $kname ($kconf). Accelerator: $accel."
		echo "Host CPUs when idle: $host_idle."
		echo "Made by \`make profile\` ($how);"
		echo "Documentation/benchmark.rst reads it."
		echo
		cat "$RUN/profile.txt"
		if [ -n "$svgs" ]; then
			echo
			echo "Flame graphs (every sample's stack; host:, uml: and rroce: name the"
			echo "host kernel's, the UML kernel's and rroce.ko's functions):"
			for f in $svgs; do echo "[$(basename "$f")]($(basename "$f"))"; done
		fi
	} >"$out"
	echo "written to $out$svgs"
	exit 0
fi
if [ "$MODE" = ab ]; then
	# rroce against itself, one boolean module parameter on and off
	# (tests/bench/ab.sh): what a datapath step is worth, same boot.
	if [ -n "${BASE:-}" ]; then
		# B is an earlier commit's module, built from that commit's tree
		# (its own build script) for the same kernel.
		[ -z "${PARAM:-}" ] || die "make bench-ab: PARAM or BASE, not both"
		base=$(git rev-parse --verify -q "$BASE^{commit}") || die "BASE=$BASE is not a commit"
		MB=$RROCE_CACHE/bench-module-base
		rm -rf "$MB" && mkdir -p "$MB"
		git archive "$base" | tar -C "$MB" -xf -
		log "building rroce.ko of $(git log -1 --format='%h (%s)' "$base") in $MB"
		"$MB/scripts/build-module.sh"
		export BENCH_AB_MODULE_B=$MB/rroce.ko
		PARAM=base-$(git rev-parse --short=7 "$base")
	fi
	[ -n "${PARAM:-}" ] || die "make bench-ab PARAM=NAME (a module parameter) or BASE=COMMIT"
	BENCH_AB_PARAM=$PARAM BENCH_AB_ROWS=${ROWS:-all} $RUNNER --timeout "${RROCE_BENCH_TIMEOUT:-3600}" 'bash tests/bench/ab.sh' | tee "$RUN/log"
	[ -s "$RUN/ab.csv" ] || die "the A/B run produced no results (see $RUN)"
	accel=$(cat "$RUN/accel" 2>/dev/null || echo unknown)
	kind=bench
	[ "$RROCE_BENCH" = 1 ] || kind=test
	[ "$RROCE_UML" = 0 ] || kind=uml
	out=$(result_path "ab-$PARAM-$kind-$accel")
	/usr/bin/python3 scripts/bench-ab.py "$RUN/ab.csv" "$PARAM" "$kver, $kind kernel ($kconf)" "$accel" | tee "$out"
	echo "written to $out"
	exit 0
fi
$RUNNER --timeout "${RROCE_BENCH_TIMEOUT:-3600}" 'bash tests/bench/guest.sh' | tee "$RUN/log"
[ -s "$RUN/bench.csv" ] || die "the benchmark produced no results (see $RUN)"
accel=$(cat "$RUN/accel" 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
kind=test
[ "$RROCE_BENCH" = 0 ] || kind=bench
[ "$RROCE_UML" = 0 ] || kind=uml
gcpu=$(cat "$RUN/guest-cpu" 2>/dev/null || echo unknown)
# The emulator decides what an instruction costs under TCG (QEMU 7.2
# runs PCLMULQDQ as a bit loop; Documentation/benchmark.rst, "A newer
# QEMU"), so the table names it.
if [ "$RROCE_UML" = 0 ]; then
	qv=$(qemu-system-x86_64 --version 2>/dev/null | head -1)
	gcpu="$gcpu; ${qv:-QEMU unknown}"
fi
out=$(result_path "$kind-$accel")
/usr/bin/python3 scripts/bench-table.py "$RUN/bench.csv" \
	"$kver, $kind kernel ($kconf)" "$cpu; guest CPU: $gcpu" "$accel" | tee "$out"
echo "written to $out"
