#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make compare`: rdma-core's test suite (pyverbs) on rroce and on rdma_rxe
# in the same VM boot, the same way (tests/vm/t85-pyverbs.sh), then the two
# results side by side in Documentation/pyverbs-compare.rst, and the tests
# rdma_rxe passes in tests/pyverbs/rxe-passes (what make check holds rroce
# to).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"
scripts/deps.sh
scripts/build-kernel.sh
scripts/build-module.sh
mkdir -p "$RROCE_CACHE/vmrun"
RUN=$(mktemp -d "$RROCE_CACHE/vmrun/compare.XXXXXX")
export RROCE_VM_RUNDIR=$RUN
scripts/vm.sh --timeout 2400 -- 'bash tests/vm/t85-pyverbs.sh; RROCE_PYVERBS_DRIVER=rxe bash tests/vm/t85-pyverbs.sh' |
	tee "$RUN/log"
for d in rroce rxe; do
	[ -s "$RUN/pyverbs.$d.results" ] || die "no pyverbs results for $d (see $RUN)"
done
{
	echo "# Tests that pass on rdma_rxe ($(rroce_kver)) in the test VM: \`make compare\`"
	echo "# writes this list; t85-pyverbs requires each to pass on rroce."
	awk '$2 == "ok" { print $1 }' "$RUN/pyverbs.rxe.results"
} >tests/pyverbs/rxe-passes
/usr/bin/python3 scripts/compare-table.py "$RUN/pyverbs.rroce.results" "$RUN/pyverbs.rxe.results" \
	"$(rroce_kver)" "$(date -u +%Y-%m-%d)" >Documentation/pyverbs-compare.rst
log "written Documentation/pyverbs-compare.rst and tests/pyverbs/rxe-passes"
