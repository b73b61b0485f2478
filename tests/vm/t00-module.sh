#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The module and its environment: rroce loaded, the reference peer loadable,
# a clean unload/reload cycle.
. tests/vm/lib.sh

check module.loaded module_loaded rroce
kunit_ran() { dmesg | grep -q 'Subtest: rroce_'; }
check module.kunit_ran kunit_ran
check module.rxe_modprobe modprobe rdma_rxe
check module.rxe_unload rmmod rdma_rxe
reload() { rmmod rroce && insmod rroce.ko && module_loaded rroce; }
check module.reload reload
