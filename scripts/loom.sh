#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs rroce's loom models: the CQ notify state machine with its dispatcher
# protocol and the shared-ring index protocol (tests/loom_notify.rs), and a
# transmit lane's sender election (tests/loom_lanes.rs).
#
# Usage: scripts/loom.sh [TESTNAME-FILTER]
#
# Environment:
#   LOOM_MAX_PREEMPTIONS  preemption bound (default 5: ~40 s, the lane models
#                         capped at 4 and 5; 3: ~5 s)
#   CARGO_BUILD_JOBS      build parallelism (default 1)
# Loom builds go to target/loom so they do not evict the normal test build.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"

export LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-5}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$RROCE_ROOT/target/loom}
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom"

log "loom: preemption bound $LOOM_MAX_PREEMPTIONS"
T0=$(date +%s)
cargo test --release --test loom_notify --test loom_lanes -- --nocapture --test-threads=1 "$@"
log "loom: done in $(($(date +%s) - T0))s"
