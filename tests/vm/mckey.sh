# SPDX-License-Identifier: GPL-2.0
# Source it: mckey_pair RECV_NS RECV_IP SEND_NS SEND_IP GROUP runs
# rdmacm-utils' mckey (UD multicast through the RDMA CM: the CM joins the
# IPv4 group, librdmacm attaches the QP) with a receiver expecting 20
# datagrams and a sender sending them; both must finish.
mckey_pair() {
	ip netns exec "$1" timeout 60 stdbuf -oL mckey -m "$5" -b "$2" -C 20 >/tmp/mckey.recv 2>&1 &
	local r=$!
	# The receiver has joined (and attached) before the sender sends.
	for _ in $(seq 50); do grep -q "receiving data" /tmp/mckey.recv && break; sleep 0.2; done
	ip netns exec "$3" timeout 60 mckey -m "$5" -b "$4" -s -C 20 >/tmp/mckey.send 2>&1
	local rc=$?
	wait $r || rc=1
	grep -q "return status 0" /tmp/mckey.recv || rc=1
	[ $rc = 0 ] || sed 's/^/    /' /tmp/mckey.recv /tmp/mckey.send
	return $rc
}
