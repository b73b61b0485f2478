#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs a command as root inside User-Mode Linux (the kernel `make bench
# UML=1` builds) on the host's own root filesystem (hostfs), with the
# module $RROCE_MODULE inserted, in this directory; two virtual CPUs, each
# a host thread (seccomp mode, which UML's SMP needs). The command's
# output is printed; its exit status is this script's. The run directory
# ($RROCE_VM_RUNDIR, else a new one) keeps the command, its status and
# the kernel log, as scripts/vm.sh does for the VM.
#
#   scripts/uml.sh [--timeout SECS] 'COMMAND'
set -euo pipefail
export RROCE_UML=1
. "$(dirname "$0")/lib.sh"
timeout=1800
if [ "${1:-}" = --timeout ]; then
	timeout=$2
	shift 2
fi
[ $# = 1 ] || die "usage: scripts/uml.sh [--timeout SECS] 'COMMAND'"
B=$(rroce_build_dir) || die "no kernel fetched yet"
[ -x "$B/linux" ] || die "no UML kernel in $B: run UML=1 scripts/build-kernel.sh"
MODULE=${RROCE_MODULE:-$RROCE_ROOT/rroce.ko}
[ -f "$MODULE" ] || die "no module $MODULE"
RUN=${RROCE_VM_RUNDIR:-}
[ -n "$RUN" ] || RUN=$(mktemp -d "$RROCE_CACHE/vmrun/uml.XXXXXX")
mkdir -p "$RUN"
printf '%s\n' "$1" >"$RUN/cmd"
rm -f "$RUN/rc"
echo UML >"$RUN/accel"
# perftest turns cycles into time with /proc/cpuinfo's "cpu MHz", which
# UML's lacks: the host's is given to the guest.
mhz=$(awk -F: '/^cpu MHz/ { gsub(/ /, "", $2); print $2; exit }' /proc/cpuinfo)
log "booting UML $(rroce_kver) (2 CPUs, timeout ${timeout}s, run dir $RUN)"
# Unknown key=value parameters reach init as its environment.
set +e
timeout -k 10 "$timeout" "$B/linux" mem=2G ncpus=2 seccomp=on \
	root=/dev/root rootflags=/ rootfstype=hostfs rw \
	init="$RROCE_ROOT/tests/bench/uml-init.sh" con=null con0=null,fd:1 \
	RROCE_ROOT="$RROCE_ROOT" RROCE_RUN="$RUN" RROCE_MODULE="$MODULE" \
	RROCE_UML_BUILD="$B" RROCE_MHZ="${mhz:-2000}" \
	${BENCH_REPS:+BENCH_REPS=$BENCH_REPS} ${BENCH_AB_PARAM:+BENCH_AB_PARAM=$BENCH_AB_PARAM} ${BENCH_AB_ROWS:+BENCH_AB_ROWS=$BENCH_AB_ROWS} \
	${BENCH_AB_MODULE_B:+BENCH_AB_MODULE_B=$BENCH_AB_MODULE_B} ${PROFILE_ROWS:+PROFILE_ROWS=$PROFILE_ROWS} </dev/null | tee "$RUN/console" |
	grep -v '^\[ *[0-9.]*\] '
set -e
[ -f "$RUN/rc" ] || die "UML ended without finishing the command (console: $RUN/console)"
rc=$(cat "$RUN/rc")
log "command exit status $rc (kernel log: $RUN/dmesg)"
exit "$rc"
