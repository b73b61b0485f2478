# SPDX-License-Identifier: GPL-2.0
"""An AF_SMC echo pair for tests/vm/t67-ulps.sh: `server ADDR` accepts one
connection and echoes what it reads; `client ADDR` sends 8 MiB of random
bytes in pieces and checks the echo. Python's socket module has no AF_SMC
addresses, so bind/listen/accept/connect go through libc; the data moves
through socket objects wrapping the descriptors."""
import ctypes
import os
import socket
import struct
import sys

AF_SMC, SMCPROTO_SMC = 43, 0
PORT = 18670
libc = ctypes.CDLL(None, use_errno=True)


def sockaddr(addr):
    b = struct.pack("!HH4s8x", socket.AF_INET, PORT, socket.inet_aton(addr))
    # sin_family is host order, the rest network order.
    b = struct.pack("=H", socket.AF_INET) + b[2:]
    return ctypes.create_string_buffer(b, len(b))


def call(name, *args):
    r = getattr(libc, name)(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{name}: {os.strerror(e)}")
    return r


def smc_socket():
    return call("socket", AF_SMC, socket.SOCK_STREAM, SMCPROTO_SMC)


def add_ueid(eid):
    """Adds a user EID through the SMC generic netlink family."""
    nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)  # NETLINK_GENERIC
    nl.bind((0, 0))

    def attr(kind, payload):
        a = struct.pack("=HH", 4 + len(payload), kind) + payload
        return a + b"\0" * (-len(a) % 4)

    def request(family, cmd, attrs, seq):
        body = struct.pack("=BBH", cmd, 1, 0) + attrs
        # NLM_F_REQUEST | NLM_F_ACK
        nl.send(struct.pack("=IHHII", 16 + len(body), family, 0x5, seq, 0) + body)
        found = None
        while True:
            msg = nl.recv(65536)
            ln, kind = struct.unpack_from("=IH", msg)
            if kind == 2:  # NLMSG_ERROR: 0 is the ACK
                err = struct.unpack_from("=i", msg, 16)[0]
                if err and err != -17:  # EEXIST: added before
                    raise OSError(-err, f"netlink command {cmd}: {os.strerror(-err)}")
                return found
            found = msg

    # CTRL_CMD_GETFAMILY (3) with CTRL_ATTR_FAMILY_NAME (2) on GENL_ID_CTRL (16).
    reply = request(16, 3, attr(2, b"SMC_GEN_NETLINK\0"), 1)
    off, family = 20, None
    while off + 4 <= len(reply):
        ln, kind = struct.unpack_from("=HH", reply, off)
        if kind == 1:  # CTRL_ATTR_FAMILY_ID
            family = struct.unpack_from("=H", reply, off + 4)[0]
        off += (ln + 3) & ~3
    if family is None:
        raise SystemExit("no SMC_GEN_NETLINK family")
    # SMC_NETLINK_ADD_UEID (10), SMC_NLA_EID_TABLE_ENTRY (1): 32 characters, blank-padded.
    request(family, 10, attr(1, eid.encode().ljust(32) + b"\0"), 2)
    print(f"user EID {eid} added")
    return 0


def main():
    role, addr = sys.argv[1], sys.argv[2]
    if role == "ueid":
        return add_ueid(addr)
    sa = sockaddr(addr)
    if role == "server":
        fd = smc_socket()
        one = ctypes.c_int(1)
        call("setsockopt", fd, socket.SOL_SOCKET, socket.SO_REUSEADDR, ctypes.byref(one), 4)
        call("bind", fd, sa, len(sa.raw))
        call("listen", fd, 1)
        c = socket.socket(fileno=call("accept", fd, None, None))
        while True:
            d = c.recv(1 << 16)
            if not d:
                break
            c.sendall(d)
        c.close()
        os.close(fd)
        return 0
    fd = smc_socket()
    call("connect", fd, sa, len(sa.raw))
    s = socket.socket(fileno=fd)
    data = os.urandom(8 << 20)
    got = bytearray()
    for off in range(0, len(data), 1 << 18):
        s.sendall(data[off:off + (1 << 18)])
        while len(got) < off + min(1 << 18, len(data) - off):
            d = s.recv(1 << 18)
            if not d:
                raise SystemExit("connection closed early")
            got += d
    s.shutdown(socket.SHUT_WR)
    s.close()
    if bytes(got) != data:
        raise SystemExit("echo differs")
    print(f"{len(data)} bytes echoed over AF_SMC")
    return 0


sys.exit(main())
