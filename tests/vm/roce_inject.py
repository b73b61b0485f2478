#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Send hostile RoCEv2 packets over plain UDP (IPv6, where the ICRC can be
computed from userspace: IPv4's ICRC covers the IP ID, which a UDP socket
does not choose).

    roce_inject.py SRC6 DST6 CASE [COUNT]

CASE: short | bad_icrc | bad_opcode | no_qp | truncated_reth | bad_pad
"""
import socket
import struct
import sys
import zlib


def icrc(src, dst, udp, roce):
    """The RoCEv2 ICRC of an IPv6 packet (variant fields masked to ones)."""
    payload_len = 8 + len(roce) + 4
    ip6 = bytes([0x6F, 0xFF, 0xFF, 0xFF]) + struct.pack("!HBB", payload_len, 17, 0xFF)
    ip6 += src + dst
    udp = udp[:6] + b"\xff\xff"
    bth = bytearray(roce[:12])
    bth[4] = 0xFF  # resv8a
    data = ip6 + udp + bytes(bth) + roce[12:]
    # CRC-32 seeded with the masked 8-byte LRH, as rdma_rxe: crc32_le
    # with seed 0xdebb20e3, then inverted.
    crc = zlib.crc32(data, (~0xDEBB20E3) & 0xFFFFFFFF)
    return struct.pack("<I", crc)


def bth(opcode, qpn, psn, pad=0):
    return struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, qpn & 0xFFFFFF, psn & 0xFFFFFF)


def main():
    for _ in range(int(sys.argv[4]) if len(sys.argv) > 4 else 1):
        send_one()


def send_one():
    src, dst, case = sys.argv[1], sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((src, 0))
    sport = s.getsockname()[1]
    s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
    if case == "short":
        roce = b"\x04\x00\x00"
        s.sendto(roce, (dst, 4791))
        return
    if case == "bad_icrc":
        roce = bth(0x04, 0x42, 1) + b"x" * 16 + b"\0\0\0\0"
        s.sendto(roce, (dst, 4791))
        return
    if case == "bad_opcode":
        roce = bth(0x1F, 0x42, 1) + b"y" * 8
    elif case == "no_qp":
        roce = bth(0x04, 0xABCDE, 1) + b"z" * 8
    elif case == "truncated_reth":
        roce = bth(0x0A, 0x42, 1) + b"\0" * 4
    elif case == "bad_pad":
        roce = bth(0x04, 0x42, 1, pad=3) + b"\0" * 2
    else:
        sys.exit("unknown case " + case)
    udp = struct.pack("!HHHH", sport, 4791, 8 + len(roce) + 4, 0)
    s.sendto(roce + icrc(s6, d6, udp, roce), (dst, 4791))


main()
