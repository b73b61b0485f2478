#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics (RDMA) on rroce, end to end: the kernel's NVMe target
# (nvmet-rdma, a file-backed namespace through configfs) and host
# (nvme-rdma, which needs fast registration) on one rroce device, the
# topology blktests uses. fio writes patterned data through the namespace
# and verifies it at 4 KiB and 1 MiB blocks with several I/Os in flight;
# the host disconnects and reconnects; `rdma resource show` lists the
# ULPs' QPs and MRs; then the device is removed under I/O: the host sees
# errors and gives up, the kernel log stays clean.
#
# nvme-rdma and nvmet-rdma create their CM IDs in init_net: the device is
# on a dummy netdev there, and both ends reach its address through lo.
. tests/vm/lib.sh

# Booted with ib_core.force_mr=1 (make check runs this script a second
# time so), the target's rdma_rw registers memory with fast registration
# too: the same checks under other names. That boot also sets
# nvmet_rdma.use_srq=1: the target's queues then take their receives from
# one shared receive queue per completion vector, and every disconnect
# drains QPs on an SRQ (ib_drain_qp waits for LAST_WQE_REACHED).
T=nvmeof
grep -qw 'ib_core.force_mr=1' /proc/cmdline && T=nvmeof_force_mr
SRQ=0
grep -qw 'nvmet_rdma.use_srq=1' /proc/cmdline && SRQ=1

NQN=rroce-nvmeof-test
ADDR=198.51.100.66
CFG=/sys/kernel/config/nvmet
# The backing file on a tmpfs of its own: the guest's /tmp is the host's
# file system over 9p, whose block size the target cannot use (it reports
# an LBA data size of 0 and the host skips the namespace).
FS=/tmp/t66fs
IMG=$FS/nvmet.img
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:5e3b1c2a-6f0d-4c36-9a55-72f1c3e0b066
klog_mark $T

command -v nvme >/dev/null && command -v fio >/dev/null ||
	{ fail $T.tools "nvme-cli or fio missing (scripts/deps.sh installs them)"; exit 0; }
for m in nvmet nvmet-rdma nvme-rdma; do
	modprobe "$m" 2>/tmp/t66.mod || { fail $T.modules "modprobe $m: $(cat /tmp/t66.mod)"; exit 0; }
done
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config

ip link add t66d type dummy && ip addr add $ADDR/24 dev t66d && ip link set t66d up ||
	{ fail $T.netdev "dummy netdev setup failed"; exit 0; }
check $T.add rdma link add rroce66 type rroce netdev t66d

target_up() {
	mkdir -p $FS && mount -t tmpfs -o size=300M t66fs $FS &&
		truncate -s 256M $IMG &&
		mkdir $CFG/subsystems/$NQN &&
		echo 1 >$CFG/subsystems/$NQN/attr_allow_any_host &&
		mkdir $CFG/subsystems/$NQN/namespaces/1 &&
		echo $IMG >$CFG/subsystems/$NQN/namespaces/1/device_path &&
		echo 1 >$CFG/subsystems/$NQN/namespaces/1/buffered_io &&
		echo 1 >$CFG/subsystems/$NQN/namespaces/1/enable &&
		mkdir $CFG/ports/1 &&
		echo rdma >$CFG/ports/1/addr_trtype &&
		echo ipv4 >$CFG/ports/1/addr_adrfam &&
		echo $ADDR >$CFG/ports/1/addr_traddr &&
		echo 4420 >$CFG/ports/1/addr_trsvcid &&
		ln -s $CFG/subsystems/$NQN $CFG/ports/1/subsystems/$NQN
}
check $T.target target_up

# The namespace's block device once the controller is live (at most 20 s).
ns_dev() {
	local c
	for _ in $(seq 100); do
		for c in /sys/class/nvme/nvme*; do
			[ -r "$c/subsysnqn" ] && [ "$(cat "$c/subsysnqn")" = $NQN ] || continue
			[ "$(cat "$c/transport")" = rdma ] || continue
			for n in "$c"/nvme*n1 /sys/block/"$(basename "$c")"n1; do
				[ -e "/dev/$(basename "$n")" ] && { echo "/dev/$(basename "$n")"; return 0; }
			done
		done
		sleep 0.2
	done
	return 1
}
connect() {
	nvme connect -t rdma -a $ADDR -s 4420 -n $NQN --hostnqn=$HOSTNQN \
		--ctrl-loss-tmo=3 --reconnect-delay=1 -i 2 >/tmp/t66.conn 2>&1 &&
		ns_dev >/tmp/t66.dev || { cat /tmp/t66.conn; dmesg | tail -5; return 1; }
}
check $T.connect connect
DEV=$(cat /tmp/t66.dev 2>/dev/null)
[ -n "$DEV" ] || { fail $T.device "no namespace block device"; exit 0; }

# fio: write a verifiable pattern, read it back and check every block.
fio_verify() {
	local bs=$1 size=$2
	timeout $((240 * SLOW)) fio --name=t66 --filename="$DEV" --ioengine=libaio --direct=1 \
		--rw=randwrite --bs="$bs" --iodepth=8 --size="$size" --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --verify_state_save=0 --randrepeat=0 --output=/tmp/t66.fio >/dev/null 2>&1
	local rc=$?
	grep -q 'err= 0' /tmp/t66.fio || rc=1
	[ $rc = 0 ] || tail -n 15 /tmp/t66.fio
	return $rc
}
check $T.fio_4k fio_verify 4k 8M
check $T.fio_1m fio_verify 1M 64M

# The ULPs' objects show in the restrack: the host's and the target's
# queues (QPs) and the host's fast-registration MRs.
resources() {
	local qps mrs
	qps=$(rdma resource show qp link rroce66/1 2>/dev/null | grep -c 'type RC')
	mrs=$(rdma resource show mr dev rroce66 2>/dev/null | grep -c mrn)
	echo "RC QPs $qps, MRs $mrs"
	[ "$qps" -ge 4 ] && [ "$mrs" -ge 1 ]
}
check $T.restrack resources
if [ $SRQ = 1 ]; then
	# The target made its SRQs on rroce66 (rdma_rw's QPs are on them).
	target_srqs() {
		local n
		n=$(rdma resource show srq dev rroce66 2>/dev/null | grep -c srqn)
		echo "SRQs $n, use_srq $(cat /sys/module/nvmet_rdma/parameters/use_srq)"
		[ "$n" -ge 1 ]
	}
	check $T.target_srq target_srqs
fi

check $T.disconnect nvme disconnect -n $NQN
check $T.reconnect connect
DEV=$(cat /tmp/t66.dev 2>/dev/null)
check $T.fio_after_reconnect fio_verify 4k 4M

# The device removed under I/O: the I/O fails, the host tries to
# reconnect and gives up after ctrl-loss-tmo; nothing oopses.
timeout 60 fio --name=t66del --filename="$DEV" --ioengine=libaio --direct=1 --rw=randrw \
	--bs=64k --iodepth=8 --size=64M --time_based --runtime=30 >/tmp/t66.del 2>&1 &
fpid=$!
sleep 3
check $T.link_del_under_io rdma link del rroce66
gone() {
	for _ in $(seq 150); do
		kill -0 $fpid 2>/dev/null || break
		sleep 0.2
	done
	! kill -0 $fpid 2>/dev/null || { echo "fio still running 30 s after the device left"; return 1; }
}
check $T.io_ends gone
wait $fpid
io_failed() { grep -qE 'err=[ ]*-?[1-9]|error' /tmp/t66.del || { tail -5 /tmp/t66.del; return 1; }; }
check $T.io_errors_seen io_failed
# The controller is deleted after ctrl-loss-tmo (3 s).
ctrl_gone() {
	for _ in $(seq 100); do
		grep -qs $NQN /sys/class/nvme/nvme*/subsysnqn || return 0
		sleep 0.2
	done
	nvme disconnect -n $NQN
	echo "controller still there 20 s after the device left"
	return 1
}
check $T.host_gives_up ctrl_gone

# Cleanup: target down, modules out, netdev gone.
rm -f $CFG/ports/1/subsystems/$NQN
rmdir $CFG/ports/1 $CFG/subsystems/$NQN/namespaces/1 $CFG/subsystems/$NQN 2>/dev/null
check $T.rmmod modprobe -r nvme-rdma nvmet-rdma
ip link del t66d
rm -f $IMG
umount $FS

klog_clean $T $T.kernel_clean
