#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build rroce.ko as it is built for a kernel without CONFIG_KUNIT and check
# that it contains no test code and builds without warnings.
#
# The test kernel has CONFIG_KUNIT=y, which the kernel hands rustc as
# `--cfg CONFIG_KUNIT` (include/generated/rustc_cfg). This script makes a
# copy of the built kernel tree out of hard links, rewrites only that file
# without the CONFIG_KUNIT cfgs, and builds a copy of the module sources
# against it: the module's #[cfg(CONFIG_KUNIT)] code is then compiled out
# exactly as for a production kernel.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

K=$(rroce_build_dir) || die "no kernel: run make kernel"
[ -f "$K/.rroce-built" ] || die "kernel in $K is not built: run make kernel"
N=$K-nokunit
if [ ! -f "$N/.rroce-nokunit" ] || [ "$K/.rroce-built" -nt "$N/.rroce-nokunit" ]; then
	rm -rf "$N"
	cp -al "$K" "$N"
	# Files a module build may write, and include/, become real copies, so
	# nothing done in the copy reaches the test kernel's tree through a
	# hard link; the copy's Makefile names the copy as the output tree.
	for f in "$N"/* "$N"/.[!.]*; do
		[ -f "$f" ] || continue
		cp --remove-destination "$K/${f##*/}" "$f"
	done
	rm -rf "$N/include" && cp -a "$K/include" "$N/include"
	sed "s|^export KBUILD_OUTPUT = .*|export KBUILD_OUTPUT = $N|" "$K/Makefile" >"$N/Makefile.new"
	mv "$N/Makefile.new" "$N/Makefile"
	grep -q "^export KBUILD_OUTPUT = $N\$" "$N/Makefile" || die "cannot point $N/Makefile at the copy"
	# A new file, not an edit through the hard link.
	grep -v -e '^--cfg=CONFIG_KUNIT$' -e '^--cfg=CONFIG_KUNIT="y"$' "$K/include/generated/rustc_cfg" \
		>"$N/include/generated/rustc_cfg.new"
	rm -f "$N/include/generated/rustc_cfg"
	mv "$N/include/generated/rustc_cfg.new" "$N/include/generated/rustc_cfg"
	touch "$N/.rroce-nokunit"
fi
grep -q '^--cfg=CONFIG_KUNIT$' "$N/include/generated/rustc_cfg" && die "CONFIG_KUNIT still set in $N"

T=$(mktemp -d)
# KEEP=1 keeps the copy and its build.log for a look after a failure.
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
tar -C "$RROCE_ROOT" --exclude=./target --exclude=./build --exclude=./fuzz --exclude=./.git \
	--exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod*' \
	--exclude=./modules.order --exclude=./Module.symvers --exclude='.*.o' --exclude='*.rmeta' -cf - . | tar -C "$T" -xf -
log "building rroce.ko without CONFIG_KUNIT"
if ! KDIR=$N "$T/scripts/build-module.sh" >"$T/build.log" 2>&1; then
	cat "$T/build.log"
	die "the module does not build without CONFIG_KUNIT"
fi
if grep -qiE 'warning|error' "$T/build.log"; then
	cat "$T/build.log"
	die "the module builds with warnings without CONFIG_KUNIT"
fi
# Test code leaves its names in the symbol table (Rust symbols carry the
# module path): KUnit suites, the consumer tests, selftests.
syms=$(nm "$T/rroce.ko" | grep -iE 'kunit|kconsumer|selftest|5tests' || true)
if [ -n "$syms" ]; then
	echo "$syms" | head -20
	die "rroce.ko built without CONFIG_KUNIT still contains test code"
fi
with=$(stat -c %s "$RROCE_ROOT/rroce.ko" 2>/dev/null || echo 0)
without=$(stat -c %s "$T/rroce.ko")
echo "rroce.ko without CONFIG_KUNIT: $without bytes, no test symbols (with CONFIG_KUNIT: $with bytes)"
