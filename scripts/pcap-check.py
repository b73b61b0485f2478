#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Check every RoCEv2 packet of a capture (pcap, Ethernet link type): its
ICRC recomputed from the packet (IPv4 and IPv6, variant fields masked as the
RoCEv2 annex says), and its BTH opcode one of the IBTA RC/UC/UD opcodes rroce and rdma_rxe send.
A UDP GSO packet (rroce sends runs of equal-size packets as one on a veth,
which a capture there sees whole) is checked as the packets it is cut
into: the segment size is the one of a full packet with a BTH alone at
some path MTU for which every segment's ICRC checks, each segment with
the headers segmentation gives it (its own lengths; IPv4: the ID plus its
index).
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


MTUS = (256, 512, 1024, 2048, 4096)


def gso_segments(ip, ver, udp_off):
    """The packets a UDP GSO packet `ip` is cut into, if some full-packet
    segment size makes every segment check; else None."""
    hdr, payload = ip[:udp_off + 8], ip[udp_off + 8:]
    for mtu in MTUS:
        seg = 12 + mtu + 4
        if len(payload) <= seg:
            continue
        out = []
        for i, start in enumerate(range(0, len(payload), seg)):
            body = payload[start:start + seg]
            h = bytearray(hdr)
            if ver == 4:
                struct.pack_into(">H", h, 2, udp_off + 8 + len(body))
                struct.pack_into(">H", h, 4, (struct.unpack_from(">H", hdr, 4)[0] + i) & 0xFFFF)
            else:
                struct.pack_into(">H", h, 4, 8 + len(body))
            struct.pack_into(">H", h, udp_off + 4, 8 + len(body))
            pkt = bytes(h) + body
            if len(body) < 16 or not icrc_ok(pkt, ver, udp_off):
                break
            out.append(pkt)
        else:
            return out
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    counts, bad, gso, segs = {}, 0, 0, 0
    for frame in p2v.packets(sys.argv[1]):
        r = p2v.roce_ip_packet(frame)
        if not r:
            continue
        ver, op, ip = r
        udp_off = (ip[0] & 0x0F) * 4 if ver == 4 else 40
        if icrc_ok(ip, ver, udp_off):
            pkts = [ip]
        else:
            pkts = gso_segments(ip, ver, udp_off) or [ip]
            if len(pkts) > 1:
                gso += 1
                segs += len(pkts)
        for ip in pkts:
            op = ip[udp_off + 8]
            ok = op in KNOWN and icrc_ok(ip, ver, udp_off)
            key = (ver, op)
            counts.setdefault(key, [0, 0])[0 if ok else 1] += 1
            bad += not ok
    for (ver, op), (good, nok) in sorted(counts.items()):
        name = p2v.OPNAMES.get(op, hex(op))
        print(f"  IPv{ver} {name:26} {good:6} ok {nok:4} bad")
    total = sum(g + b for g, b in counts.values())
    print(f"{total} RoCEv2 packets, {bad} bad ({segs} of them in {gso} UDP GSO packets)")
    sys.exit(1 if bad or not total else 0)


main()
