# SPDX-License-Identifier: GPL-2.0
# rroce: software RoCEv2 RDMA device, out-of-tree Rust kernel module.
#
#   make demo    set everything up, boot a VM, create rroce devices, run perftest
#   make check   set everything up and run every test (host, KUnit, VM)
#
# Other targets: deps kernel module host-test vm CMD='...' bench profile compare fuzz loom clippy fmt structure clean

SHELL := /bin/bash
KDIR ?=
export KDIR

.PHONY: all deps kernel module samples host-test vm check demo bench bench-ab profile compare fuzz loom clippy fmt fmt-check uapi-check structure clean

all: module

deps:
	@scripts/deps.sh

kernel: deps
	@scripts/build-kernel.sh

module:
	@scripts/build-module.sh

# Userspace sample programs, built against the distribution's libibverbs and
# rroce's uapi header.
# The userspace conformance suite (tests/conformance/) and the hostile-user
# programs (tests/hostile/) are built with them.
SAMPLES := $(patsubst samples/%.c,build/samples/%,$(wildcard samples/*.c)) \
	   $(patsubst tests/conformance/%.c,build/tests/%,$(wildcard tests/conformance/*.c)) \
	   $(patsubst tests/hostile/%.c,build/tests/%,$(wildcard tests/hostile/*.c))
samples: $(SAMPLES)
build/samples/%: samples/%.c samples/rroce_util.h $(wildcard uapi/rdma/*.h)
	@mkdir -p $(dir $@)
	@$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -Iuapi $< -libverbs -o $@
build/tests/%: tests/conformance/%.c samples/rroce_util.h $(wildcard uapi/rdma/*.h)
	@mkdir -p $(dir $@)
	@$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -Iuapi -Isamples $< -libverbs -lpthread -o $@
build/tests/%: tests/hostile/%.c tests/hostile/hostile.h samples/rroce_util.h $(wildcard uapi/rdma/*.h)
	@mkdir -p $(dir $@)
	@$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -Iuapi -Isamples $< -libverbs -lpthread -o $@

host-test:
	@cargo test --quiet

structure:
	@scripts/structure.py

uapi-check:
	@scripts/check-uapi.sh

# Boot the cached kernel with rroce.ko inserted and run CMD as root in this directory.
vm: kernel module
	@scripts/vm.sh "$(CMD)"

check:
	@scripts/check.sh

demo:
	@scripts/demo.sh

bench:
	@scripts/bench.sh

# rroce against itself with one boolean module parameter on and off, same
# boot (tests/bench/ab.sh): make bench-ab PARAM=rx_handover; or this tree
# against an earlier commit of it: make bench-ab BASE=HEAD~1; ROWS=lat for
# the small-message and latency rows only, ROWS=read for the READ rows,
# ROWS=mtu4096 for the large-message rows at MTU 4096 (BENCH_REPS=10 for
# more runs a side).
bench-ab:
	@PARAM=$(PARAM) BASE=$(BASE) ROWS=$(ROWS) scripts/bench.sh ab

# Where the CPU time goes in some of the benchmark's rows (perf in the VM;
# with UML=1 the host's perf, and ROWS=4k for the 4 KiB rows; ROWS=small,
# ROWS=write and ROWS=read4 in the VM: the per-message rows, the 1-QP WRITE
# rows, the 4-QP READ rows).
profile:
	@PROFILE_ROWS=$(ROWS) scripts/bench.sh profile

# rdma-core's pyverbs suite on rroce and rdma_rxe side by side
# (Documentation/pyverbs-compare.rst).
compare:
	@scripts/compare.sh

fuzz:
	@scripts/fuzz.sh $(SECONDS)

loom:
	@scripts/loom.sh

clippy:
	@cargo clippy --all-targets -- -D warnings
	@scripts/build-module.sh CLIPPY=1

fmt:
	@cargo fmt
	@rustfmt --edition 2021 src/rroce_main.rs

fmt-check:
	@cargo fmt --check
	@rustfmt --edition 2021 --check src/rroce_main.rs

clean:
	@if [ -n "$$(scripts/lib.sh 2>/dev/null)" ]; then :; fi
	@rm -rf target
	@find . -path ./fuzz -prune -o \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' -o -name '.*.cmd' -o -name '*.d' \) -print0 | xargs -0 rm -f
	@rm -f Module.symvers modules.order
