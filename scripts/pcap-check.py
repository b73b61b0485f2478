#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Check every RoCEv2 packet of a capture (pcap, Ethernet link type): its
ICRC recomputed from the packet (IPv4 and IPv6, variant fields masked as the
RoCEv2 annex says), and its BTH opcode one of the IBTA RC/UC/UD opcodes rroce and rdma_rxe send.
Prints a summary per opcode; exits 1 on any bad packet or an empty capture.

  pcap-check.py CAPTURE.pcap
"""
import importlib.util
import sys as _sys
_sys.dont_write_bytecode = True
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("p2v", os.path.join(HERE, "pcap-to-vectors.py"))
p2v = importlib.util.module_from_spec(spec)
spec.loader.exec_module(p2v)

# RC (with ATOMIC WRITE, 0x1d), UC, UD.
KNOWN = set(range(0x00, 0x15)) | {0x16, 0x17, 0x1d} | set(range(0x20, 0x2c)) | {0x64, 0x65}


def icrc_ok(ip, ver, udp_off):
    masked = bytearray(ip)
    if ver == 4:
        masked[1] = 0xFF            # TOS
        masked[8] = 0xFF            # TTL
        masked[10:12] = b"\xff\xff"  # header checksum
    else:
        masked[0] |= 0x0F           # traffic class (low nibble)
        masked[1:4] = b"\xff\xff\xff"  # traffic class + flow label
        masked[7] = 0xFF            # hop limit
    masked[udp_off + 6:udp_off + 8] = b"\xff\xff"  # UDP checksum
    masked[udp_off + 8 + 4] = 0xFF  # BTH resv8a
    # CRC-32 over a masked 8-byte LRH and the masked packet.
    crc = zlib.crc32(b"\xff" * 8 + bytes(masked[:-4]))
    return struct.pack("<I", crc) == bytes(ip[-4:])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    counts, bad = {}, 0
    for frame in p2v.packets(sys.argv[1]):
        r = p2v.roce_ip_packet(frame)
        if not r:
            continue
        ver, op, ip = r
        udp_off = (ip[0] & 0x0F) * 4 if ver == 4 else 40
        ok = op in KNOWN and icrc_ok(ip, ver, udp_off)
        key = (ver, op)
        counts.setdefault(key, [0, 0])[0 if ok else 1] += 1
        bad += not ok
    for (ver, op), (good, nok) in sorted(counts.items()):
        name = p2v.OPNAMES.get(op, hex(op))
        print(f"  IPv{ver} {name:26} {good:6} ok {nok:4} bad")
    total = sum(g + b for g, b in counts.values())
    print(f"{total} RoCEv2 packets, {bad} bad")
    sys.exit(1 if bad or not total else 0)


main()
