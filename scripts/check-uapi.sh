#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Checks uapi/rdma/rroce-abi.h, in the spirit of the kernel's headers_install
# and headers_check:
#
#  hygiene   SPDX line with Linux-syscall-note, include guard, only
#            <linux/types.h>/<linux/stddef.h> included, no kernel-only types
#            (u32, bool, ...), no plain __u64/__s64 (use __aligned_u64), no
#            __KERNEL__/CONFIG_/__user, ASCII only; and, when the kernel tree
#            is unpacked, the kernel's own scripts/headers_install.sh must
#            leave the header unchanged
#  compile   stand-alone, first include of a translation unit, with
#            gcc -std=c99 and g++ -std=c++11 (-Wall -Wextra -Werror), and
#            with -Wpadded (no implicit padding anywhere)
#  rxe       tests/abi/rxe_compat.c: _Static_asserts that every structure
#            has the size, alignment and field offsets of its rxe
#            counterpart, against the distribution's <rdma/rdma_user_rxe.h>
#            (linux-libc-dev) and the kernel tree's include/uapi/rdma copy,
#            and against libibverbs' <infiniband/verbs.h> (struct ibv_wc,
#            IBV_* values), each where present
#
# Prints "uapi: N checks passed" (one check per hygiene rule, compile and
# _Static_assert) and exits non-zero if any failed. The kernel tree is
# $KSRC, else the one scripts/fetch-kernel.sh unpacked; CC/CXX override
# gcc/g++.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RROCE_ROOT"

HDR=uapi/rdma/rroce-abi.h
COMPAT=tests/abi/rxe_compat.c
CC=${CC:-gcc}
CXX=${CXX:-g++}
KSRC=${KSRC:-$(rroce_src_dir || true)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PASS=0
FAIL=0
ok() { PASS=$((PASS + ${1:-1})); }
bad() {
	FAIL=$((FAIL + 1))
	echo "uapi: FAILED: $*" >&2
}
# run NAME CMD...: one check that CMD succeeds; shows its output if not.
run() {
	local name=$1
	shift
	if "$@" >"$TMP/log" 2>&1; then
		ok
	else
		bad "$name"
		sed 's/^/    /' "$TMP/log" >&2
	fi
}
# none NAME REGEX FILE: one check that no line of FILE matches REGEX.
none() {
	local hits
	hits=$(grep -nE "$2" "$3")
	if [ -z "$hits" ]; then
		ok
	else
		bad "$1"
		printf '%s\n' "$hits" | sed 's/^/    /' >&2
	fi
}

[ -f "$HDR" ] || die "$HDR not found"
command -v "$CC" >/dev/null || die "no C compiler ($CC): install gcc"
command -v "$CXX" >/dev/null || die "no C++ compiler ($CXX): install g++"

# --- hygiene ---------------------------------------------------------------

# The header without comments and without the directives, for the type rules.
"$CC" -fpreprocessed -dD -E -P -x c "$HDR" 2>/dev/null >"$TMP/nocomment.h" ||
	bad "cannot strip comments from $HDR"
grep -vE '^[[:space:]]*#' "$TMP/nocomment.h" >"$TMP/code.h"

spdx=$(head -n1 "$HDR")
case "$spdx" in
'/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */' | \
	'/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */')
	ok
	;;
*) bad "first line must be the SPDX line 'GPL-2.0 WITH Linux-syscall-note' (optionally OR Linux-OpenIB), got: $spdx" ;;
esac

guard=$(grep -m1 -E '^#[[:space:]]*ifndef[[:space:]]+' "$TMP/nocomment.h" | awk '{print $2}')
first=$(grep -m1 -E '^#' "$TMP/nocomment.h" | awk '{print $1, $2}')
second=$(grep -m2 -E '^#' "$TMP/nocomment.h" | tail -n1 | awk '{print $1, $2}')
last=$(grep -E '^#' "$TMP/nocomment.h" | tail -n1)
if [ -n "$guard" ] && [ "$first" = "#ifndef $guard" ] && [ "$second" = "#define $guard" ] &&
	[[ "$last" =~ ^#[[:space:]]*endif ]] && [[ "$guard" != _UAPI* ]]; then
	ok
else
	bad "include guard: the first directives must be '#ifndef X' '#define X' and the last '#endif'"
fi

incs=$(grep -E '^#[[:space:]]*include' "$TMP/nocomment.h" | grep -vE '^#[[:space:]]*include[[:space:]]+<linux/(types|stddef)\.h>$')
if [ -z "$incs" ]; then ok; else bad "only <linux/types.h> and <linux/stddef.h> may be included: $incs"; fi

none "kernel-only or libc types (use __u8..__u64, __s8..__s64)" \
	'\b(u8|u16|u32|u64|s8|s16|s32|s64|bool|_Bool|size_t|ssize_t|uintptr_t|u?int(8|16|32|64)_t|dma_addr_t|phys_addr_t|atomic_t|refcount_t)\b' "$TMP/code.h"
none "plain 64-bit types (use __aligned_u64, __aligned_s64 so 32-bit user space agrees)" \
	'\b__(u|s)64\b' "$TMP/code.h"
none "'long', 'int' or pointers in the ABI (their size differs between 32- and 64-bit user space)" \
	'\b(long|int|short|char)\b|\*' "$TMP/code.h"
none "kernel-only annotations (__user, __force, __iomem, __packed, __KERNEL__, CONFIG_*, compiler.h)" \
	'__user|__force|__iomem|__attribute_const__|\b__packed\b|__KERNEL__|\bCONFIG_|linux/compiler\.h|__ASSEMBLY__' "$TMP/nocomment.h"
none "non-ASCII characters" '[^[:print:][:space:]]' "$HDR"

# The kernel's own headers_install.sh (with unifdef built from the tree) must
# have nothing to strip or rewrite.
if [ -n "$KSRC" ] && [ -f "$KSRC/scripts/headers_install.sh" ] && [ -f "$KSRC/scripts/unifdef.c" ]; then
	mkdir -p "$TMP/hi/scripts"
	if "$CC" -O1 -w -o "$TMP/hi/scripts/unifdef" "$KSRC/scripts/unifdef.c" >"$TMP/log" 2>&1 &&
		(cd "$TMP/hi" && sh "$KSRC/scripts/headers_install.sh" "$RROCE_ROOT/$HDR" "$TMP/hi/out.h") >"$TMP/log" 2>&1; then
		if cmp -s "$HDR" "$TMP/hi/out.h"; then
			ok
		else
			bad "the kernel's headers_install.sh rewrites $HDR:"
			diff "$HDR" "$TMP/hi/out.h" | sed 's/^/    /' >&2
		fi
	else
		bad "the kernel's headers_install.sh rejects $HDR"
		sed 's/^/    /' "$TMP/log" >&2
	fi
else
	echo "uapi: note: no kernel tree (KSRC), headers_install.sh check skipped" >&2
fi

# --- stand-alone compiles ----------------------------------------------------

printf '#include <rdma/rroce-abi.h>\n#include <rdma/rroce-abi.h>\nstruct rroce_cqe rroce_check_cqe;\n' >"$TMP/alone.c"
cp "$TMP/alone.c" "$TMP/alone.cc"
run "gcc -std=c99 stand-alone" "$CC" -std=c99 -Wall -Wextra -Werror -fsyntax-only -Iuapi "$TMP/alone.c"
run "gcc -std=c11 -Wpadded (implicit padding)" "$CC" -std=c11 -Wall -Wextra -Wpadded -Werror -fsyntax-only -Iuapi "$TMP/alone.c"
run "g++ -std=c++11 stand-alone" "$CXX" -std=c++11 -Wall -Wextra -Werror -fsyntax-only -Iuapi "$TMP/alone.cc"
run "g++ -std=c++11 -Wpadded (implicit padding)" "$CXX" -std=c++11 -Wall -Wextra -Wpadded -Werror -fsyntax-only -Iuapi "$TMP/alone.cc"

# --- byte compatibility with rxe and libibverbs -------------------------------

# compat NAME INCDIR-OR-EMPTY DEFINES...: compile rxe_compat.c; on success
# every _Static_assert it contains (after preprocessing) counts as a check.
compat() {
	local name=$1 inc=$2
	shift 2
	local args=(-std=gnu11 -Wall -Wextra -Werror -Iuapi)
	[ -n "$inc" ] && args+=(-I"$inc")
	args+=("$@")
	if "$CC" "${args[@]}" -fsyntax-only "$COMPAT" >"$TMP/log" 2>&1; then
		local n
		n=$("$CC" "${args[@]}" -E -P "$COMPAT" | grep -o '_Static_assert' | wc -l)
		ok "$n"
		echo "uapi: $name: $n static assertions hold"
	else
		bad "$name: rroce-abi.h differs from it"
		grep -E 'error|static assertion' "$TMP/log" | sed 's/^/    /' >&2
	fi
}

# rxe_flags DIR: -D flags for what the rxe/uverbs headers in DIR have.
rxe_flags() {
	local d=$1
	grep -qE '}[[:space:]]*flush;' "$d/rdma_user_rxe.h" && echo -DRXE_HAS_FLUSH
	grep -q 'atomic_wr)' "$d/rdma_user_rxe.h" && echo -DRXE_HAS_ATOMIC_WR
	grep -q 'IB_UVERBS_WR_FLUSH' "$d/ib_user_verbs.h" && echo -DUVERBS_HAS_FLUSH
	true
}

checked=0
if [ -f /usr/include/rdma/rdma_user_rxe.h ]; then
	# shellcheck disable=SC2046
	compat "distribution rdma_user_rxe.h ($(dpkg-query -W -f='linux-libc-dev ${Version}' linux-libc-dev 2>/dev/null || echo /usr/include))" "" \
		-DRROCE_CHECK_RXE $(rxe_flags /usr/include/rdma)
	checked=$((checked + 1))
fi
if [ -n "$KSRC" ] && [ -f "$KSRC/include/uapi/rdma/rdma_user_rxe.h" ]; then
	mkdir -p "$TMP/kinc/rdma"
	cp "$KSRC"/include/uapi/rdma/{rdma_user_rxe,ib_user_verbs,ib_user_ioctl_verbs}.h "$TMP/kinc/rdma/"
	# shellcheck disable=SC2046
	compat "kernel tree rdma_user_rxe.h ($(basename "$KSRC"))" "$TMP/kinc" \
		-DRROCE_CHECK_RXE $(rxe_flags "$TMP/kinc/rdma")
	checked=$((checked + 1))
fi
[ "$checked" -gt 0 ] || bad "no rdma_user_rxe.h to compare with: install linux-libc-dev or set KSRC to a kernel tree"
if [ -f /usr/include/infiniband/verbs.h ]; then
	compat "libibverbs verbs.h" "" -DRROCE_CHECK_IBVERBS
else
	echo "uapi: note: no <infiniband/verbs.h> (libibverbs-dev), struct ibv_wc check skipped" >&2
fi

if [ "$FAIL" -eq 0 ]; then
	echo "uapi: $PASS checks passed"
else
	echo "uapi: $PASS checks passed, $FAIL failed"
	exit 1
fi
