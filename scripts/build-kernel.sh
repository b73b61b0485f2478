#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Configure and build the test kernel from the fetched source, out of tree,
# cached under $RROCE_CACHE/build/<version>-<hash of version, fragment, rustc>.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$RROCE_ROOT/scripts/fetch-kernel.sh"
SRCDIR=$(rroce_src_dir)
B=$(rroce_build_dir)
if [ -f "$B/.rroce-built" ]; then
	exit 0
fi
mkdir -p "$B"
log "building kernel $(rroce_kver) in $B (cold build: about 14 minutes on 2 cores)"
start=$(date +%s)
MK=(make -s -C "$SRCDIR" O="$B" -j"$(nproc)" LLVM="$RROCE_LLVM")
base=("$SRCDIR/kernel/configs/kvm_guest.config")
if [ "$RROCE_UML" = 1 ]; then
	# UML's signal stub returns from its handler with a bare rt_sigreturn
	# that must find the signal frame at the stack pointer: with
	# kernel/uml.config's FRAME_POINTER the compiler pushes a frame first
	# and every process dies at its first signal (init segfaults at sp 0).
	# The stub alone is built without frame pointers, as a command-line
	# override of its own per-file flags (lib.sh hashes this line).
	MK+=(ARCH=um "CFLAGS_stub.o=$RROCE_UML_STUB_CFLAGS")
	base=()
fi
"${MK[@]}" tinyconfig >/dev/null
ARCH=$(rroce_arch) "$SRCDIR/scripts/kconfig/merge_config.sh" -m -O "$B" "$B/.config" \
	"${base[@]}" $(rroce_fragments) >/dev/null
"${MK[@]}" olddefconfig >/dev/null
"${MK[@]}" rustavailable >/dev/null || die "the kernel does not accept this Rust toolchain: $(rustc --version)"
"${MK[@]}" olddefconfig >/dev/null
# Every option of the fragments must have survived dependency resolution,
# as the last fragment that names it set it (merge order).
bad=0
declare -A want=()
order=()
while IFS= read -r line; do
	case "$line" in CONFIG_*=*) ;; *) continue ;; esac
	opt=${line%%=*}
	[ -n "${want[$opt]+set}" ] || order+=("$opt")
	want[$opt]=${line#*=}
done < <(rroce_fragments | xargs cat)
for opt in "${order[@]}"; do
	val=${want[$opt]}
	if [ "$val" = n ]; then
		grep -q "^$opt=" "$B/.config" && { log "config: $opt should be off"; bad=1; }
	else
		grep -qx "$opt=$val" "$B/.config" || { log "config: wanted $opt=$val, got: $(grep "^$opt=\|# $opt " "$B/.config" || echo unset)"; bad=1; }
	fi
done
[ $bad = 0 ] || die "the config fragment did not apply cleanly (see above)"
"${MK[@]}" >"$B/build.log" 2>&1 || { tail -40 "$B/build.log"; die "kernel build failed (log: $B/build.log)"; }
"${MK[@]}" modules_prepare >/dev/null
# Modules (rdma_rxe, udp_tunnel, ...) for modprobe inside the guest.
rm -rf "$B/.rroce-mods"
"${MK[@]}" INSTALL_MOD_PATH="$B/.rroce-mods" modules_install >/dev/null
grep -q '^CONFIG_RUSTC_VERSION_TEXT=' "$B/.config" || die "kernel config records no rustc"
rustc --version >"$B/.rroce-rustc"
date -u +%FT%TZ >"$B/.rroce-built"
log "kernel built in $(( $(date +%s) - start ))s"
