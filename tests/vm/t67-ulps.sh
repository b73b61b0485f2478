#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The kernel's other storage and file ULPs on rroce: each one is loaded,
# connected over an rroce device and made to move data that is read back
# and compared, then torn down.
#   nfs     NFSv4.2 over RDMA: svcrdma (nfsd) serves a tmpfs, xprtrdma mounts it
#   rnbd    RNBD/RTRS: a memory-backed null_blk exported and mapped
#   rds     RDS over RDMA (rds_rdma), sockets forced onto the IB transport;
#           by hand only (RROCE_ULPS=rds): RDS itself trips lockdep (its
#           rds_trans_sem against the CM's handler_mutex) and warns in
#           rds_ib_recv_exit when unloaded, on rdma_rxe as on rroce (see
#           rds_down), and a lockdep report turns lockdep off for the rest
#           of the boot
#   iser    iSCSI over RDMA: LIO's isert target, open-iscsi's iser initiator
#   smb     SMB Direct: ksmbd serving a tmpfs, cifs mounting it with `rdma`
#   smc     SMC-R: AF_SMC sockets between two namespaces (tests/vm/smc_echo.py)
#
# Like t66, the ULPs create their CM IDs in init_net: both ends use
# addresses of one dummy netdev that carries one rroce device, and reach
# them through lo (the topology blktests uses for its rdma groups). SMC-R
# is the exception: it looks for the RDMA device of the netdev its TCP
# connection leaves through, which lo is not, so its two ends are two
# namespaces joined by veth, an rroce device on each.
# Userspace comes from Debian (nfs-kernel-server, open-iscsi, ksmbd-tools,
# cifs-utils; scripts/deps.sh installs them). The guest's root file system
# is the host's: each daemon's state and configuration directory is bound
# over with a private copy on a tmpfs, so nothing of the host's setup
# leaks in and nothing the test writes survives the guest.
. tests/vm/lib.sh
. tests/demo/netns.sh

ADDR=198.51.100.67
ADDR2=198.51.100.68
W=/tmp/t67w
klog_mark ulps

ip link add t67d type dummy && ip addr add $ADDR/24 dev t67d &&
	ip addr add $ADDR2/24 dev t67d && ip link set t67d up ||
	{ fail ulp.netdev "dummy netdev setup failed"; exit 0; }
# RROCE_ULP_DRIVER=rxe runs the same on rdma_rxe (by hand, for comparison).
DRV=${RROCE_ULP_DRIVER:-rroce}
[ "$DRV" = rroce ] || modprobe rdma_rxe
D=${DRV}67
check ulp.add rdma link add $D type $DRV netdev t67d
mkdir -p $W && mount -t tmpfs -o size=400M t67w $W || { fail ulp.tmpfs "no tmpfs"; exit 0; }
head -c 24M /dev/urandom >$W/pattern

# A private, writable copy of a directory of the host's.
private_dir() {
	local d=$1 tmp
	tmp=$(mktemp -d $W/priv.XXXX)
	[ -d "$d" ] && cp -a "$d"/. "$tmp"/
	mkdir -p "$d" 2>/dev/null
	mount --bind "$tmp" "$d" && PRIVATE+=("$d")
}
PRIVATE=()

# writable DIR: DIR as it is when the guest can write there, else private.
writable() { touch "$1/.t67" 2>/dev/null && rm -f "$1/.t67" || private_dir "$1"; }

# file_check MNT DIR: the pattern written through the mount MNT lands in
# the server's directory DIR and reads back through MNT (after the page
# cache is dropped, so from the server).
file_check() {
	timeout 120 cp $W/pattern $1/data && sync && echo 3 >/proc/sys/vm/drop_caches &&
		cmp $W/pattern $2/data && timeout 120 cmp $W/pattern $1/data
}

# block_check DEV BACKING: the pattern written to the block device DEV
# with direct I/O lands on the target's BACKING and reads back from DEV.
block_check() {
	timeout 120 dd if=$W/pattern of=$1 bs=1M oflag=direct status=none && sync &&
		timeout 120 cmp -n 25165824 $W/pattern $2 &&
		timeout 120 dd if=$1 of=$W/back bs=1M count=24 iflag=direct status=none &&
		cmp $W/pattern $W/back
}

# rc_qps: the RC QPs on the device (the ULP's: nothing else runs here).
rc_qps() { rdma resource show qp link $D/1 2>/dev/null | grep -c 'type RC'; }

###############################################################################
# NFSv4.2 over RDMA
nfs() {
	local exp=$W/nfs mnt=$W/nfsmnt
	modprobe rpcrdma && modprobe nfsd && modprobe nfsv4 || return 1
	mkdir -p $exp $mnt
	private_dir /var/lib/nfs && mkdir -p /var/lib/nfs/v4recovery || return 1
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	# The shortest grace period, so OPEN does not wait 90 s for it.
	echo 10 >/proc/fs/nfsd/nfsv4leasetime
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	exportfs -i -o rw,no_root_squash,insecure,no_subtree_check,fsid=0,sync "*:$exp" || return 1
	rpc.mountd -N 2 -N 3 --no-udp </dev/null >/dev/null 2>&1 || return 1
	rpc.nfsd -N 3 --no-udp --rdma=20049 4 || return 1
	grep rdma /proc/fs/nfsd/portlist || { echo "no rdma listener"; return 1; }
	timeout 60 mount -t nfs4 -o vers=4.2,proto=rdma,port=20049 $ADDR:/ $mnt || return 1
	grep " $mnt " /proc/mounts
	grep -q "vers=4.2,.*proto=rdma" /proc/mounts || { echo "not NFSv4.2 over rdma"; return 1; }
	echo "RC QPs: $(rc_qps)"
	file_check $mnt $exp
}
nfs_down() {
	umount $W/nfsmnt 2>/dev/null
	rpc.nfsd 0 2>/dev/null
	pkill rpc.mountd 2>/dev/null
	exportfs -ua 2>/dev/null
	umount /proc/fs/nfsd 2>/dev/null
	modprobe -r nfsv4 nfsd rpcrdma 2>&1
}

###############################################################################
# RNBD over RTRS: the server exports a memory-backed null_blk.
rnbd() {
	modprobe null_blk nr_devices=1 gb=1 memory_backed=1 && modprobe rnbd-server &&
		modprobe rnbd-client || return 1
	echo "sessname=t67 path=ip:$ADDR device_path=/dev/nullb0" \
		>/sys/class/rnbd-client/ctl/map_device || return 1
	local d
	for _ in $(seq 50); do
		d=$(ls /sys/block | grep '^rnbd' | head -1)
		[ -n "$d" ] && [ -b /dev/$d ] && break
		sleep 0.2
	done
	[ -n "$d" ] || { echo "no rnbd block device"; return 1; }
	echo "mapped /dev/$d; RC QPs: $(rc_qps)"
	block_check /dev/$d /dev/nullb0
}
rnbd_down() {
	for u in /sys/block/rnbd*/rnbd/unmap_device; do
		[ -e "$u" ] && echo normal >"$u"
	done
	# The session goes once the disk's last reference does, in a kernel
	# thread, after unmap_device has returned; rnbd_client_exit skips a
	# session on its way out and does not wait for it, so an rmmod in that
	# window frees the client's code under the session's close (a WARN in
	# rnbd_destroy_sessions, then an oops in rtrs_clt_close_work, seen
	# here). Wait for the RTRS session to go first: one that never goes is
	# a completion rroce never delivered, and fails here.
	local i
	for i in $(seq 150); do
		[ -e /sys/class/rtrs-client/t67 ] || break
		sleep 0.2
	done
	[ -e /sys/class/rtrs-client/t67 ] && { echo "RTRS session t67 still there 30 s after unmap"; return 1; }
	echo "RTRS session gone after about $((i * 2 / 10)) s"
	modprobe -r rnbd-client rnbd-server null_blk 2>&1
}

###############################################################################
# RDS over RDMA: two sockets on the two addresses, forced onto the IB
# transport (SO_RDS_TRANSPORT before bind), exchange checked messages.
rds() {
	modprobe rds_rdma || return 1
	timeout 120 /usr/bin/python3 - "$ADDR" "$ADDR2" <<'EOF'
import os, socket, sys, hashlib
SOL_RDS, SO_RDS_TRANSPORT, RDS_TRANS_IB = 276, 8, 0
a, b = sys.argv[1], sys.argv[2]
def sock(addr, port):
    s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    s.setsockopt(SOL_RDS, SO_RDS_TRANSPORT, RDS_TRANS_IB)
    s.bind((addr, port))
    return s
s1, s2 = sock(a, 18634), sock(b, 18635)
s2.settimeout(20)
s1.settimeout(20)
for n in range(64):
    msg = os.urandom(1 + (n * 4093) % 60000)
    s1.sendto(msg, (b, 18635))
    got, src = s2.recvfrom(65536)
    assert got == msg and src[0] == a, f"message {n} differs"
    s2.sendto(hashlib.sha256(got).digest(), (a, 18634))
    ack, _ = s1.recvfrom(64)
    assert ack == hashlib.sha256(msg).digest(), f"ack {n} differs"
print("64 messages each way")
EOF
	local rc=$?
	echo "RC QPs: $(rc_qps)"
	rdma resource show qp link $D/1
	[ $rc = 0 ] && [ "$(rc_qps)" -ge 1 ]
}
# rds_rdma stays loaded until the device is gone: unloaded first, it
# leaves connections behind (rds_ib_recv_exit warns) whose CM IDs the
# device's removal then calls into the unloaded module (an oops, seen on
# rdma_rxe). Run it last.
rds_down() { :; }

###############################################################################
# iSCSI over RDMA: LIO target (fileio backstore) with an iSER portal,
# open-iscsi logs in through its iser interface.
IQN=iqn.2026-11.org.rroce:t67
T=/sys/kernel/config/target
iser() {
	modprobe target_core_mod && modprobe target_core_file && modprobe iscsi_target_mod &&
		modprobe ib_isert && modprobe ib_iser && modprobe sd_mod || return 1
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	truncate -s 64M $W/iscsi.img
	mkdir -p $T/core/fileio_0/t67 &&
		echo "fd_dev_name=$W/iscsi.img,fd_dev_size=67108864" >$T/core/fileio_0/t67/control &&
		echo 1 >$T/core/fileio_0/t67/enable &&
		mkdir -p $T/iscsi/$IQN/tpgt_1/lun/lun_0 &&
		ln -s $T/core/fileio_0/t67 $T/iscsi/$IQN/tpgt_1/lun/lun_0/t67 &&
		mkdir $T/iscsi/$IQN/tpgt_1/np/$ADDR:3260 &&
		echo 1 >$T/iscsi/$IQN/tpgt_1/np/$ADDR:3260/iser &&
		echo 1 >$T/iscsi/$IQN/tpgt_1/attrib/generate_node_acls &&
		echo 1 >$T/iscsi/$IQN/tpgt_1/attrib/cache_dynamic_acls &&
		echo 0 >$T/iscsi/$IQN/tpgt_1/attrib/demo_mode_write_protect &&
		echo 0 >$T/iscsi/$IQN/tpgt_1/attrib/authentication &&
		echo 1 >$T/iscsi/$IQN/tpgt_1/enable || return 1
	private_dir /etc/iscsi && private_dir /var/lib/iscsi || return 1
	writable /run/lock || return 1
	iscsid </dev/null >/dev/null 2>&1 || return 1
	sleep 1
	# Discovery over TCP (the portal serves both), login over iSER.
	timeout 60 iscsiadm -m discovery -t st -p $ADDR:3260 || return 1
	timeout 60 iscsiadm -m node -T $IQN -p $ADDR:3260 -o update -n iface.transport_name -v iser || return 1
	timeout 60 iscsiadm -m node -T $IQN -p $ADDR:3260 --login || return 1
	local d
	for _ in $(seq 100); do
		d=$(for s in /sys/class/scsi_disk/*/device/block/*; do
			[ -e "$s" ] && grep -qs LIO "$(dirname "$(dirname "$s")")/vendor" && basename "$s"
		done | head -1)
		[ -n "$d" ] && [ -b /dev/$d ] && break
		sleep 0.2
	done
	[ -n "$d" ] || { echo "no iSCSI disk"; return 1; }
	iscsiadm -m session -P 1 | grep -E 'Iface Transport|Target:'
	iscsiadm -m session -P 1 | grep -q 'Iface Transport: iser' || { echo "session not over iser"; return 1; }
	echo "disk /dev/$d; RC QPs: $(rc_qps)"
	block_check /dev/$d $W/iscsi.img
}
iser_down() {
	local tpg=$T/iscsi/$IQN/tpgt_1
	timeout 30 iscsiadm -m node -T $IQN -p $ADDR:3260 --logout || iscsiadm -m session
	timeout 30 iscsiadm -m node -o delete
	pkill iscsid
	# configfs comes down in the reverse order of its making.
	echo 0 >$tpg/enable
	rm -f $tpg/lun/lun_0/t67
	rmdir $tpg/lun/lun_0
	echo 0 >$tpg/np/$ADDR:3260/iser
	rmdir $tpg/np/$ADDR:3260
	rmdir $tpg $T/iscsi/$IQN $T/iscsi
	rmdir $T/core/fileio_0/t67 $T/core/fileio_0
	for _ in $(seq 50); do
		modprobe -r ib_iser ib_isert iscsi_target_mod target_core_file 2>/dev/null && return 0
		sleep 0.2
	done
	modprobe -r ib_iser ib_isert iscsi_target_mod target_core_file 2>&1
	ls $T/iscsi $T/core; lsmod | grep -E "iser|isert|iscsi|target"
	return 1
}

###############################################################################
# SMB Direct: ksmbd shares a tmpfs, cifs mounts it with `rdma`.
smb() {
	local share=$W/smb mnt=$W/smbmnt
	modprobe ksmbd && modprobe cifs || return 1
	mkdir -p $share $mnt
	private_dir /etc/ksmbd && writable /run || return 1
	cat >/etc/ksmbd/ksmbd.conf <<EOF
[global]
	server min protocol = SMB3_11
[t67]
	path = $share
	read only = no
	force user = root
EOF
	ksmbd.adduser -a root -p t67secret >/dev/null || return 1
	ksmbd.mountd </dev/null >/dev/null 2>&1 || return 1
	sleep 2
	timeout 60 mount -t cifs //$ADDR/t67 $mnt -o rdma,vers=3.1.1,username=root,password=t67secret || return 1
	grep " $mnt " /proc/mounts
	grep -q 'rdma' /proc/mounts || { echo "not mounted over rdma"; return 1; }
	echo "RC QPs: $(rc_qps)"
	file_check $mnt $share
}
# ksmbd's SMB Direct listeners are kthreads that return by themselves
# once kill_server has shut their sockets, and kill_server then calls
# kthread_stop() on them without holding their task_struct (7.3's
# fs/smb/server/transport_rdma.c; its TCP listener holds one, for this
# reason): a listener reaped first makes kthread_stop() work on a freed
# task, "refcount_t: addition on 0; use-after-free" in ksmbd.control (CI
# saw it once). A perf event on each listener (tests/vm/taskpin.py) holds
# its task_struct across the kill, as the TCP side does.
smb_down() {
	umount $W/smbmnt 2>/dev/null
	local pids pin rc=0
	pids=$(ps -e -o pid=,comm= | awk '$2 ~ /^ksmbd-smbdirect/ { print $1 }')
	rm -f $W/taskpin && mkfifo $W/taskpin || return 1
	/usr/bin/python3 tests/vm/taskpin.py $pids <$W/taskpin >$W/taskpin.out 2>&1 &
	pin=$!
	exec 9>$W/taskpin
	for _ in $(seq 50); do
		grep -q pinned $W/taskpin.out && break
		kill -0 $pin 2>/dev/null || break
		sleep 0.1
	done
	grep -q "pinned 2" $W/taskpin.out ||
		{ echo "ksmbd's two listeners not held ($pids): $(cat $W/taskpin.out)"; rc=1; }
	ksmbd.control -s 2>/dev/null
	exec 9>&-
	wait $pin
	sleep 1
	modprobe -r cifs ksmbd 2>&1 || rc=1
	return $rc
}

###############################################################################
# SMC-R: a TCP connection between two namespaces (veth, an rroce device on
# each end) upgraded to RDMA by AF_SMC sockets; the data is checked, and
# the SMC link's RC QPs must exist (a fallback to TCP has none).
smc() {
	modprobe smc || return 1
	netns_setup || return 1
	ip netns exec ns0 rdma link add ${D}0 type $DRV netdev v0 &&
		ip netns exec ns1 rdma link add ${D}1 type $DRV netdev v1 || return 1
	# SMC-R over RoCEv2 is SMC-Rv2, which a client proposes only with a
	# user EID configured (SMC-Rv1 needs RoCEv1 GIDs, which neither
	# rroce nor rdma_rxe has).
	/usr/bin/python3 tests/vm/smc_echo.py ueid RROCE-T67 || return 1
	ip netns exec ns1 timeout 60 /usr/bin/python3 tests/vm/smc_echo.py server 192.0.2.2 &
	local srv=$!
	sleep 2
	ip netns exec ns0 timeout 60 /usr/bin/python3 tests/vm/smc_echo.py client 192.0.2.2
	local rc=$?
	wait $srv || rc=1
	local q
	q=$(rdma resource show qp 2>/dev/null | grep -E "${D}[01]/" | grep -c 'type RC')
	echo "RC QPs on ${D}0/${D}1: $q"
	rdma resource show qp 2>/dev/null | grep -E "${D}[01]/" | head -4
	[ $rc = 0 ] && [ "$q" -ge 2 ]
}
smc_down() {
	ip netns exec ns0 rdma link del ${D}0 2>&1
	ip netns exec ns1 rdma link del ${D}1 2>&1
	netns_teardown
	sleep 1
	modprobe -r smc 2>&1
}

# Each ULP's log is shown whether it passes or not: what bound and how.
for u in ${RROCE_ULPS:-nfs rnbd iser smb smc}; do
	echo "-- $u"
	if $u >$W/$u.log 2>&1 </dev/null; then pass ulp.$u; else fail ulp.$u "$(tail -3 $W/$u.log | tr '\n' ' ')"; fi
	sed 's/^/     | /' $W/$u.log
	check ulp.${u}_down ${u}_down
done

check ulp.del rdma link del $D
for d in "${PRIVATE[@]}"; do umount "$d"; done
umount $W
ip link del t67d
klog_clean ulps ulp.kernel_clean
