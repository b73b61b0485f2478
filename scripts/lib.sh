# SPDX-License-Identifier: GPL-2.0
# Common settings for rroce's scripts. Source it, do not run it.

RROCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RROCE_CACHE=${RROCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rroce}
# The kernel series rroce targets; the exact version is whatever Debian ships.
RROCE_KSERIES=${RROCE_KSERIES:-7.3}
RROCE_FRAGMENT=$RROCE_ROOT/kernel/rroce.config
# `make check KASAN=1`: a second cached kernel, the test fragment plus
# kernel/kasan.config. 7.3's `config RUST` needs clang for KASAN, so that
# kernel and its module are built with LLVM (clang-19, lld-19).
if [ "${KASAN:-}" = 1 ] || [ "${RROCE_KASAN:-0}" = 1 ]; then
	RROCE_KASAN=1
	RROCE_LLVM=-19
else
	RROCE_KASAN=0
	RROCE_LLVM=
fi
unset KASAN
export RROCE_KASAN
# `make bench`: a third cached kernel, the test fragment plus
# kernel/bench.config (no lockdep, no KUnit, optimised for speed, the
# arch-optimised CRC32), used by the benchmark only.
if [ "${RROCE_BENCH:-0}" = 1 ]; then
	RROCE_BENCH=1
	[ "$RROCE_KASAN" = 0 ] || { echo "[rroce] error: KASAN=1 and the benchmark kernel exclude each other" >&2; exit 1; }
else
	RROCE_BENCH=0
fi
export RROCE_BENCH
# `make bench UML=1`: a fourth cached kernel, User-Mode Linux
# (kernel/uml.config alone), built with LLVM like the KASAN one; the
# benchmark runs there at the host CPU's speed instead of under TCG.
if [ "${UML:-}" = 1 ] || [ "${RROCE_UML:-0}" = 1 ]; then
	RROCE_UML=1
	RROCE_LLVM=-19
	# Its signal stub's flags (build-kernel.sh says why), for make to
	# expand: single quotes on purpose.
	# shellcheck disable=SC2016
	RROCE_UML_STUB_CFLAGS='$(CFLAGS_NO_HARDENING) -fomit-frame-pointer'
	[ "$RROCE_KASAN" = 0 ] || { echo "[rroce] error: KASAN=1 and UML=1 exclude each other" >&2; exit 1; }
	RROCE_BENCH=0
else
	RROCE_UML=0
fi
unset UML
export RROCE_UML
# The kernel's ARCH (make ARCH=...), empty for the host's.
rroce_arch() { [ "$RROCE_UML" = 0 ] || echo um; }
# Every config fragment of the selected kernel, in merge order.
rroce_fragments() {
	if [ "$RROCE_UML" = 1 ]; then
		echo "$RROCE_ROOT/kernel/uml.config"
		return
	fi
	echo "$RROCE_FRAGMENT"
	[ "$RROCE_KASAN" = 0 ] || echo "$RROCE_ROOT/kernel/kasan.config"
	[ "$RROCE_BENCH" = 0 ] || echo "$RROCE_ROOT/kernel/bench.config"
}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-19/lib}
export PATH=$HOME/.cargo/bin:$PATH

log() { printf '[rroce] %s\n' "$*" >&2; }
die() { printf '[rroce] error: %s\n' "$*" >&2; exit 1; }

# Hash of everything that determines the built kernel: the source version,
# the config fragment and the rustc that compiles the Rust parts.
rroce_kernel_key() {
	local ver=$1
	{
		echo "$ver"
		rroce_fragments | xargs cat
		[ "$RROCE_KASAN" = 0 ] || echo "LLVM=$RROCE_LLVM"
		[ "$RROCE_UML" = 0 ] || echo "ARCH=um LLVM=$RROCE_LLVM CFLAGS_stub.o=$RROCE_UML_STUB_CFLAGS"
		rustc --version
	} | sha256sum | cut -c1-12
}

# Path of the unpacked source tree (set by fetch-kernel.sh) and the build dir.
rroce_src_dir() { cat "$RROCE_CACHE/src/CURRENT" 2>/dev/null; }
rroce_kver() { cat "$RROCE_CACHE/src/VERSION" 2>/dev/null; }
rroce_build_dir() {
	local ver
	ver=$(rroce_kver) || return 1
	[ -n "$ver" ] || return 1
	local suffix=
	[ "$RROCE_KASAN" = 0 ] || suffix=-kasan
	[ "$RROCE_BENCH" = 0 ] || suffix=-bench
	[ "$RROCE_UML" = 0 ] || suffix=-uml
	echo "$RROCE_CACHE/build/$ver-$(rroce_kernel_key "$ver")$suffix"
}
