#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# init of the User-Mode Linux guest scripts/uml.sh boots (the host's root
# over hostfs): mounts what the tests need, gives perftest a "cpu MHz",
# lets modprobe find the built-in rdma_rxe, inserts rroce and runs the
# command in $RROCE_RUN/cmd; its status goes to $RROCE_RUN/rc.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
# /tmp stays the host's: this tree or the run directory may be there.
mount -t tmpfs run /run
awk -v mhz="$RROCE_MHZ" '/^processor/ { print; print "cpu MHz\t\t: " mhz; next } { print }' \
	/proc/cpuinfo >/run/cpuinfo
mount --bind /run/cpuinfo /proc/cpuinfo
# The host's /lib/modules has nothing of this kernel's: a private one
# listing what is built in.
mkdir -p /run/modules && mount --bind /run/modules /lib/modules
mkdir -p "/lib/modules/$(uname -r)"
cp "$RROCE_UML_BUILD"/modules.builtin* "/lib/modules/$(uname -r)/" 2>/dev/null
depmod 2>/dev/null
ip link set lo up
rc=1
# init must not exit (the kernel would panic): every way out powers off.
if cd "$RROCE_ROOT" && insmod "$RROCE_MODULE"; then
	bash "$RROCE_RUN/cmd"
	rc=$?
fi
dmesg >"$RROCE_RUN/dmesg"
echo $rc >"$RROCE_RUN/rc"
sync
poweroff -f
