#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install what rroce needs to build and test, when it is missing.
# Idempotent; prints nothing when everything is present.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PKGS=(qemu-system-x86 clang-19 libclang-19-dev llvm-19 lld-19 bc flex bison libelf-dev libssl-dev
      cpio kmod iproute2 rdma-core ibverbs-providers ibverbs-utils libibverbs-dev librdmacm-dev
      perftest rdmacm-utils python3-venv gcc make xz-utils zstd rsync busybox-static tshark
      ethtool procps linux-perf nvme-cli fio nfs-kernel-server nfs-common cifs-utils ksmbd-tools open-iscsi python3-pyverbs)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# tshark asks whether non-root users may capture; answer no.
	echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The toolchain named by rust-toolchain.toml, with rust-src for the kernel build.
cd "$RROCE_ROOT"
if ! rustc --version 2>/dev/null | grep -q '^rustc 1\.95\.0'; then
	log "installing the pinned Rust toolchain"
	rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install 1.95.0 --profile minimal
fi
sysroot=$(rustc --print sysroot)
if [ ! -d "$sysroot/lib/rustlib/src/rust/library/core" ]; then
	log "adding rust-src"
	rustup component add rust-src >/dev/null
fi
for c in rustfmt clippy; do
	rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null
done

# bindgen-cli >= 0.71 (cargo install).
need_bindgen=1
if command -v bindgen >/dev/null 2>&1; then
	v=$(bindgen --version | awk '{print $2}')
	if [ "$(printf '%s\n0.71.0\n' "$v" | sort -V | head -1)" = "0.71.0" ]; then need_bindgen=0; fi
fi
if [ $need_bindgen = 1 ]; then
	log "installing bindgen-cli with cargo (takes a minute)"
	cargo install --locked --quiet bindgen-cli --version '^0.71' >/dev/null 2>&1 ||
		cargo install --locked --quiet bindgen-cli
fi

# virtme-ng in a venv under the cache directory (Debian's python3, which has venv).
VENV=$RROCE_CACHE/venv
if [ ! -x "$VENV/bin/vng" ]; then
	log "installing virtme-ng into $VENV"
	mkdir -p "$RROCE_CACHE"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check virtme-ng >/dev/null
fi
exit 0
