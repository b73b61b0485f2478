#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build rroce.ko against a kernel tree: the cached test kernel by default, or
# KDIR=<built tree or /lib/modules/$(uname -r)/build> for distribution headers.
# Refuses to build with a rustc other than the one that built the kernel.
# Extra arguments go to kbuild (e.g. CLIPPY=1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KDIR=${KDIR:-}
if [ -z "$KDIR" ]; then
	KDIR=$(rroce_build_dir) || die "no kernel fetched yet: run scripts/build-kernel.sh (or make kernel)"
	[ -f "$KDIR/.rroce-built" ] || die "kernel in $KDIR is not built: run make kernel"
fi
CONF=$KDIR/include/config/auto.conf
[ -f "$CONF" ] || die "$KDIR is not a configured kernel tree (no include/config/auto.conf)"
grep -q '^CONFIG_RUST=y' "$CONF" || die "$KDIR was built without CONFIG_RUST"
want=$(sed -n 's/^CONFIG_RUSTC_VERSION_TEXT=//p' "$CONF" | sed 's/^"//; s/"$//')
[ -n "$want" ] || die "$KDIR records no CONFIG_RUSTC_VERSION_TEXT"
have=$(rustc --version)
if [ "$want" != "$have" ]; then
	die "rustc mismatch: the kernel in $KDIR was built by '$want' but this rustc is '$have'. A Rust module must be built by the same rustc as its kernel; install that toolchain or rebuild the kernel."
fi
"$RROCE_ROOT/scripts/gen-bindings.sh" "$KDIR"
uml=()
if [ "$RROCE_UML" = 1 ]; then
	# UML compiles the kernel's Rust as position-independent code, and
	# its module loader (x86's) has no GOT relocations: the module's own
	# Rust is built static with the large code model (absolute 64-bit
	# relocations, as UML's C uses -mcmodel=large).
	uml=(ARCH=um "RUSTFLAGS_MODULE=-Crelocation-model=static -Ccode-model=large")
fi
exec make -s -C "$KDIR" M="$RROCE_ROOT" LLVM="$RROCE_LLVM" "${uml[@]}" "$@" modules
