#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the virtme-ng guest (see vm.sh): make the test kernel's modules
# reachable for modprobe, insert rroce.ko, run the command, keep the kernel log
# and the exit status in the run directory.
RUN=$1
set -a
. "$RUN/env"
set +a
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# modprobe looks in /lib/modules/$(uname -r); point it at the build's modules.
KREL=$(uname -r)
MODS=$RROCE_KBUILD/.rroce-mods/lib/modules/$KREL
if [ -d "$MODS" ] && [ ! -d "/lib/modules/$KREL/kernel" ]; then
	mkdir -p "/lib/modules/$KREL" 2>/dev/null ||
		{ mount -t tmpfs tmpfs /lib/modules 2>/dev/null && mkdir -p "/lib/modules/$KREL"; }
	mount --bind "$MODS" "/lib/modules/$KREL" 2>/dev/null || echo "guest: could not expose modules at /lib/modules/$KREL" >&2
fi

rc=0
if [ "$RROCE_INSMOD" = 1 ]; then
	# rroce needs the UDP tunnel helpers, which are modules in this kernel.
	modprobe -q udp_tunnel 2>/dev/null
	modprobe -q ip6_udp_tunnel 2>/dev/null
	if ! insmod "${RROCE_MODULE:-$RROCE_ROOT/rroce.ko}"; then
		echo "guest: insmod rroce.ko failed" >&2
		rc=126
	fi
fi
if [ $rc = 0 ]; then
	cd "$RROCE_ROOT" || exit 1
	bash -c "$(cat "$RUN/cmd")"
	rc=$?
fi
dmesg >"$RUN/dmesg" 2>/dev/null
echo "$rc" >"$RUN/rc"
sync
exit "$rc"
