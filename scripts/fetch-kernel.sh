#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fetch Debian's linux-source-$RROCE_KSERIES from trixie-backports through a
# private apt configuration (own sources file, lists and cache: the system's
# apt state is untouched) and unpack it under $RROCE_CACHE/src.
# The mirror URI is read from this machine's own apt sources at run time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SRC=$RROCE_CACHE/src
if [ -n "$(rroce_src_dir)" ] && [ -f "$(rroce_src_dir)/Makefile" ] && [ -z "${RROCE_REFETCH:-}" ]; then
	exit 0
fi

mirror_uri() {
	local f uri
	# deb822 sources first, then one-line sources.
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '
			/^[[:space:]]*$/ { if (deb && uri != "" && suites ~ /(bookworm|trixie)( |$)/) { print uri; exit } deb=0; uri=""; suites=""; next }
			/^Types:/ { deb = ($0 ~ / deb( |$)/) }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { $1=""; suites = $0 }
			END { if (deb && uri != "" && suites ~ /(bookworm|trixie)( |$)/) print uri }' "$f" | head -1)
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(awk '$1=="deb" && $0 !~ /security/ { for (i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) { print $i; exit } }' "$f" | head -1)
		[ -n "$uri" ] && { echo "$uri"; return; }
	done
}

MIRROR=$(mirror_uri)
[ -n "$MIRROR" ] || die "no Debian mirror found in /etc/apt/sources*; cannot fetch linux-source-$RROCE_KSERIES"

APT=$RROCE_CACHE/apt
mkdir -p "$APT/lists/partial" "$APT/archives/partial" "$APT/etc/sources.list.d" "$APT/etc/preferences.d" "$SRC"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$KEYRING] $MIRROR trixie-backports main" >"$APT/etc/sources.list"
echo "deb [signed-by=$KEYRING] $MIRROR trixie main" >>"$APT/etc/sources.list"
APTOPTS=(-o Dir::Etc::SourceList="$APT/etc/sources.list"
	-o Dir::Etc::SourceParts="$APT/etc/sources.list.d"
	-o Dir::Etc::PreferencesParts="$APT/etc/preferences.d"
	-o Dir::State::Lists="$APT/lists"
	-o Dir::Cache="$APT"
	-o Dir::Cache::archives="$APT/archives"
	-o Dir::State::status=/dev/null
	-o APT::Get::List-Cleanup=false
	-o Debug::NoLocking=true
	-o APT::Sandbox::User=root)

log "reading trixie-backports package lists (private apt state in $APT)"
apt-get "${APTOPTS[@]}" update -qq >/dev/null 2>"$APT/update.err" ||
	die "apt-get update of the private sources failed: $(tail -3 "$APT/update.err")"
PKG=linux-source-$RROCE_KSERIES
VER=$(apt-cache "${APTOPTS[@]}" policy "$PKG" | awk '/Candidate:/ {print $2}')
[ -n "$VER" ] && [ "$VER" != "(none)" ] || die "$PKG not found in trixie-backports"
log "downloading $PKG $VER"
(cd "$APT/archives" && apt-get "${APTOPTS[@]}" download -qq "$PKG=$VER" >/dev/null)
DEB=$(ls -t "$APT/archives/${PKG}_"*.deb | head -1)
[ -f "$DEB" ] || die "download of $PKG produced no .deb"

TMP=$SRC/deb.tmp
rm -rf "$TMP"; mkdir -p "$TMP"
dpkg-deb -x "$DEB" "$TMP"
TARBALL=$(ls "$TMP"/usr/src/linux-source-*.tar.* | head -1)
[ -f "$TARBALL" ] || die "$DEB holds no source tarball"
UPSTREAM=$(basename "$TARBALL" | sed -E 's/^linux-source-//; s/\.tar\..*$//')
DEST=$SRC/linux-$VER
if [ ! -f "$DEST/Makefile" ]; then
	log "unpacking $(basename "$TARBALL")"
	rm -rf "$DEST" "$DEST.tmp"; mkdir -p "$DEST.tmp"
	tar -xf "$TARBALL" -C "$DEST.tmp" --strip-components=1
	mv "$DEST.tmp" "$DEST"
fi
rm -rf "$TMP"
# The version make reports, e.g. 7.3.4.
KVERSION=$(make -s -C "$DEST" kernelversion 2>/dev/null || echo "$UPSTREAM")
echo "$DEST" >"$SRC/CURRENT"
echo "$KVERSION" >"$SRC/VERSION"
log "kernel source $KVERSION (Debian $VER) at $DEST"
