#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Boot the cached test kernel with virtme-ng (host root filesystem visible,
# this repository writable), insert rroce.ko, run a command as root in the
# repository directory, and return its exit status.
#
#   scripts/vm.sh [--no-insmod] [--timeout SECONDS] [--] 'CMD'
#
# Every run has a timeout (default 1200 s, RROCE_VM_TIMEOUT): a hung guest is
# killed and reported, never waited on forever. KVM is used only when the CPU
# advertises vmx/svm and /dev/kvm opens (override: RROCE_KVM=0|1); otherwise
# the guest runs under TCG. The guest's kernel log is kept in the run directory
# printed at the end ($RROCE_VM_RUNDIR to choose it).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

insmod=1
timeout=${RROCE_VM_TIMEOUT:-1200}
while [ $# -gt 0 ]; do
	case "$1" in
	--no-insmod) insmod=0; shift ;;
	--timeout) timeout=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
cmd=${*:-true}

B=$(rroce_build_dir) || die "no kernel: run make kernel"
[ -f "$B/.rroce-built" ] || die "kernel in $B is not built: run make kernel"
# RROCE_MODULE: the rroce.ko to insert (make bench builds its own for the
# benchmark kernel, outside this tree).
MODULE=${RROCE_MODULE:-$RROCE_ROOT/rroce.ko}
[ $insmod = 0 ] || [ -f "$MODULE" ] || die "$MODULE is not built: run make module"
VNG=$RROCE_CACHE/venv/bin/vng
export PATH=$RROCE_CACHE/venv/bin:$PATH
[ -x "$VNG" ] || die "virtme-ng missing: run make deps"

kvm_usable() {
	case "${RROCE_KVM:-auto}" in
	0) return 1 ;;
	1) return 0 ;;
	esac
	grep -qwE 'vmx|svm' /proc/cpuinfo || return 1
	( exec 3<>/dev/kvm ) 2>/dev/null || return 1
}

RUN=${RROCE_VM_RUNDIR:-}
if [ -z "$RUN" ]; then
	mkdir -p "$RROCE_CACHE/vmrun"
	RUN=$(mktemp -d "$RROCE_CACHE/vmrun/run.XXXXXX")
fi
mkdir -p "$RUN"
rm -f "$RUN/rc" "$RUN/dmesg"
printf '%s\n' "$cmd" >"$RUN/cmd"
{
	echo "RROCE_ROOT=$RROCE_ROOT"
	echo "RROCE_KBUILD=$B"
	echo "RROCE_INSMOD=$insmod"
	echo "RROCE_MODULE=$MODULE"
	echo "RROCE_RUN=$RUN"
	echo "RROCE_KASAN=$RROCE_KASAN"
	# A subset of tests/vm/t*.sh for run-all.sh (make check KASAN=1).
	echo "RROCE_VM_TESTS='${RROCE_VM_TESTS:-}'"
	# tests/vm/t67-ulps.sh: which ULPs, on which driver (by hand).
	echo "RROCE_ULPS='${RROCE_ULPS:-}'"
	echo "RROCE_ULP_DRIVER='${RROCE_ULP_DRIVER:-}'"
	# tests/bench/guest.sh: repetitions per row (make bench).
	echo "BENCH_REPS='${BENCH_REPS:-}'"
	# tests/bench/ab.sh: the module parameter it turns on and off.
	echo "BENCH_AB_PARAM='${BENCH_AB_PARAM:-}'"
	# ... and which rows (all, or lat).
	echo "BENCH_AB_ROWS='${BENCH_AB_ROWS:-}'"
	# ... or the module it runs against instead (make bench-ab BASE=).
	echo "BENCH_AB_MODULE_B='${BENCH_AB_MODULE_B:-}'"
	# tests/bench/profile.sh: which rows (make profile ROWS=small).
	echo "PROFILE_ROWS='${PROFILE_ROWS:-}'"
} >"$RUN/env"

accel=(--disable-kvm)
mode=TCG
if kvm_usable; then accel=(); mode=KVM; fi
# Extra QEMU options (below) change what a timing means (-icount counts
# instructions): the accelerator's name, which a benchmark's file name and
# header carry, says so.
[ -z "${RROCE_VM_QEMU_OPTS:-}" ] || mode="$mode+$(printf '%s' "$RROCE_VM_QEMU_OPTS" | tr -s ' ' '_')"
echo "$mode" >"$RUN/accel"
log "booting $(rroce_kver) under $mode (timeout ${timeout}s, run dir $RUN)"

# The guest's console is QEMU's stdio. When our stdout is a regular file
# (`make check > check.log`), QEMU's stdio chardev reopens it with O_TRUNC
# and everything printed before the boot is lost; hand the VM a pipe
# instead, so the file is only ever appended to by this script.
set +e
# RROCE_VM_APPEND: more kernel command line (e.g. ib_core.force_mr=1).
append=()
[ -z "${RROCE_VM_APPEND:-}" ] || append=(--append "$RROCE_VM_APPEND")
# RROCE_VM_VERBOSE=1: the guest's console too (an oops that ends the
# guest before the kernel log is saved shows only there).
[ "${RROCE_VM_VERBOSE:-0}" = 0 ] || append+=(--verbose)
# RROCE_VM_QEMU_OPTS: more QEMU options, separated by spaces (none may
# contain one), e.g. "-icount shift=0,sleep=off": guest time counted in
# instructions (Documentation/benchmark.rst).
[ -z "${RROCE_VM_QEMU_OPTS:-}" ] || append+=(--qemu-opts="$RROCE_VM_QEMU_OPTS")
timeout -k 20 "$timeout" "$VNG" --run "$B" "${accel[@]}" "${append[@]}" \
	--cpus "${RROCE_VM_CPUS:-2}" --memory "${RROCE_VM_MEM:-2G}" --user root \
	--rwdir "$RROCE_ROOT" --rwdir "$RUN" --cwd "$RROCE_ROOT" \
	--exec "bash $RROCE_ROOT/scripts/guest-run.sh $RUN" </dev/null 2>&1 | cat
vrc=${PIPESTATUS[0]}
set -e
if [ $vrc = 124 ] || [ $vrc = 137 ]; then
	log "VM TIMEOUT: the guest did not finish within ${timeout}s and was killed"
	exit 124
fi
if [ ! -f "$RUN/rc" ]; then
	log "the guest ended (vng exit $vrc) without finishing the command"
	exit 125
fi
rc=$(cat "$RUN/rc")
log "guest command exit status $rc (kernel log: $RUN/dmesg)"
exit "$rc"
