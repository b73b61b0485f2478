#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: set everything up from scratch if needed, boot the VM with
# rroce.ko, create RDMA devices on a veth pair across two network namespaces
# and run ib_send_bw and ib_write_lat between them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"
scripts/deps.sh
scripts/build-kernel.sh
scripts/build-module.sh
make -s samples
exec scripts/vm.sh --timeout "${RROCE_DEMO_TIMEOUT:-900}" 'bash tests/demo/guest.sh'
