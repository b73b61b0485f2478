#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Send hostile RoCEv2 packets over plain UDP (IPv6, where the ICRC can be
computed from userspace: IPv4's ICRC covers the IP ID, which a UDP socket
does not choose).

    roce_inject.py SRC6 DST6 CASE [COUNT]

CASE: short | bad_icrc | bad_opcode | no_qp | truncated_reth | bad_pad

    roce_inject.py live STATE_FILE [--iface IF] [--only CASE,...] [--paged] [--tag T]

The hostile peer against live RC QPs (tests/vm/t64-hostile-peer.sh): run in
the honest peer's network namespace while tests/hostile/peer_victim waits,
reads the QPNs, PSNs, keys and addresses it wrote to STATE_FILE and sends,
per case, packets with a valid ICRC at the victim QP of that case (right
QPN, PSNs around the expected one): spoofed addresses, wrong P_Keys,
duplicate READs and atomics never asked for, huge READs, out-of-sequence
middles, pad and length lies, unsolicited responses, UD/UC opcodes, SEND
with invalidate. For each case it compares the victim device's `rdma
statistic` counters before and after (exact deltas) and the packets the
victim sent back, captured with a packet socket on IF, with what the case
expects, and prints one "CHECK ok NAME" / "CHECK fail NAME: why" line per
check (see LIVE_CASES for every expectation). With --paged every packet
leaves with its UDP payload in a page fragment (see Wire), so the victim
reads it in pieces: each case then also expects rcvd_paged to count every
packet longer than the headers the receive path pulls out of the fragment.
"""
import argparse
import select
import socket
import struct
import subprocess
import sys
import time
import zlib

# linux/udp.h: the GSO segment size of a UDP socket.
UDP_SEGMENT = 103
# The RoCE headers rroce pulls into a received skb's linear part: the BTH
# and the longest extension headers (AtomicETH), wire::MAX_HDR_LEN.
ROCE_PULL = 12 + 28


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


def bth(opcode, qpn, psn, pad=0, pkey=0xFFFF, ack=False):
    return struct.pack(
        "!BBHII", opcode, pad << 4, pkey, qpn & 0xFFFFFF, (ack << 31) | (psn & 0xFFFFFF)
    )


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "live":
        sys.exit(live(sys.argv[2:]))
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


# ---- the hostile peer against live QPs --------------------------------------

PSN_MASK = 0xFFFFFF
ETH_P_IPV6 = 0x86DD
PACKET_OUTGOING = 4

# Opcodes (IBTA vol 1, 9.2.1; RC 0x00.., UC 0x20.., UD 0x60..).
RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_ONLY = 0x00, 0x01, 0x02, 0x04
RC_WRITE_MIDDLE, RC_WRITE_ONLY, RC_READ_REQ = 0x07, 0x0A, 0x0C
RC_READ_RESP_FIRST, RC_READ_RESP_MIDDLE, RC_READ_RESP_LAST = 0x0D, 0x0E, 0x0F
RC_READ_RESP_ONLY, RC_ACK, RC_ATOMIC_ACK = 0x10, 0x11, 0x12
RC_CMP_SWAP, RC_FETCH_ADD, RC_SEND_ONLY_INV = 0x13, 0x14, 0x17
UC_SEND_ONLY, UC_WRITE_ONLY, UD_SEND_ONLY = 0x24, 0x2A, 0x64
# AETH syndromes.
SYN_ACK = 0x1F  # ACK, no credit information
SYN_RNR = 0x21
NAK_SEQ, NAK_INV_REQ, NAK_REM_ACCESS, NAK_REM_OP, NAK_INV_RD = 0x60, 0x61, 0x62, 0x63, 0x64


def psn(v):
    return v & PSN_MASK


def reth(va, rkey, length):
    return struct.pack("!QII", va & (2**64 - 1), rkey, length)


def aeth(syndrome, msn=0):
    return struct.pack("!I", (syndrome << 24) | (msn & PSN_MASK))


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def deth(qkey, src_qp):
    return struct.pack("!II", qkey, src_qp & PSN_MASK)


def pattern(n, mul, add):
    """The victim's test pattern (peer_victim.c pattern())."""
    return bytes((i * mul + add) & 0xFF for i in range(n))


def padded(payload):
    """`payload` padded to 4 bytes, and the BTH pad count."""
    pad = -len(payload) % 4
    return payload + b"\0" * pad, pad


def req(opcode, qpn, p, exts=b"", payload=b"", ack=False, pkey=0xFFFF, pad=None):
    """A request (or response) packet, BTH to payload (no ICRC); the pad is
    derived from the payload unless `pad` lies."""
    if pad is None:
        payload, pad = padded(payload)
    return bth(opcode, qpn, psn(p), pad=pad, pkey=pkey, ack=ack) + exts + payload


class Wire:
    """Raw RoCEv2 over UDP/IPv6 with a valid ICRC, from any local address.

    paged: each datagram leaves in an skb whose linear part holds only the
    IP and UDP headers, its UDP payload (every RoCE header too) in a page
    fragment, as a real NIC's receive buffers deliver packets: the socket
    has UDP_SEGMENT set (to a size no datagram reaches, so none is
    segmented), which makes the stack put the payload in page fragments,
    and veth hands the skb over as it is."""

    def __init__(self, paged=False):
        self.socks = {}
        self.paged = paged

    def send(self, src, dst, roce, bad_icrc=False):
        if src not in self.socks:
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.bind((src, 0))
            if self.paged:
                s.setsockopt(socket.SOL_UDP, UDP_SEGMENT, 0xFFFF)
            self.socks[src] = s
        s = self.socks[src]
        sport = s.getsockname()[1]
        s6, d6 = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
        udp = struct.pack("!HHHH", sport, 4791, 8 + len(roce) + 4, 0)
        crc = icrc(s6, d6, udp, roce)
        if bad_icrc:
            crc = bytes([crc[0] ^ 0x01]) + crc[1:]
        s.sendto(roce + crc, (dst, 4791))


class Capture:
    """RoCEv2 packets the victim (`victim` address) sends, seen on `iface`
    with a packet socket."""

    def __init__(self, iface, victim):
        self.victim = socket.inet_pton(socket.AF_INET6, victim)
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
        self.s.bind((iface, ETH_P_IPV6))
        self.s.setblocking(False)

    def drain(self):
        while select.select([self.s], [], [], 0)[0]:
            self.s.recv(65536)

    def collect(self):
        out = []
        while select.select([self.s], [], [], 0)[0]:
            frame, addr = self.s.recvfrom(65536)
            if addr[2] == PACKET_OUTGOING:
                continue
            pkt = parse_frame(frame, self.victim)
            if pkt:
                out.append(pkt)
        return out


def parse_frame(frame, victim):
    """A RoCEv2 packet from `victim` in an Ethernet frame, as a dict."""
    if len(frame) < 14 + 40 + 8 + 12 + 4 or frame[12:14] != b"\x86\xdd":
        return None
    ip = frame[14:]
    if ip[6] != 17 or ip[8:24] != victim:
        return None
    udp = ip[40:]
    dport, ulen = struct.unpack("!HH", udp[2:6])
    if dport != 4791:
        return None
    roce = udp[8:ulen]
    opcode, flags, _, qpn, word = struct.unpack("!BBHII", roce[:12])
    pkt = {"op": opcode, "qpn": qpn & PSN_MASK, "psn": word & PSN_MASK, "syn": None}
    body = roce[12:-4]
    if opcode in (RC_ACK, RC_ATOMIC_ACK, RC_READ_RESP_FIRST, RC_READ_RESP_LAST, RC_READ_RESP_ONLY):
        pkt["syn"] = body[0]
        body = body[4:]
    pad = (flags >> 4) & 3
    pkt["payload"] = body[: len(body) - pad]
    return pkt


def describe(pkts):
    def one(p):
        syn = "" if p["syn"] is None else " syn 0x%02x" % p["syn"]
        return "op 0x%02x psn 0x%06x%s (%d bytes)" % (p["op"], p["psn"], syn, len(p["payload"]))

    return "[" + ", ".join(one(p) for p in pkts) + "]" if pkts else "none"


def counters(dev):
    """The `rdma statistic` counters of `dev` port 1, by name."""
    out = subprocess.run(
        ["rdma", "statistic", "show", "link", dev + "/1"],
        capture_output=True, text=True, check=False,
    ).stdout.split()
    c = {}
    for name, value in zip(out, out[1:]):
        if value.isdigit() and name.replace("_", "").isalpha():
            c[name] = int(value)
    return c


def read_state(path):
    mr, pairs = {}, {}
    for line in open(path):
        words = line.split()
        if not words:
            continue
        kv = {}
        for w in words[1:]:
            k, v = w.split("=", 1)
            kv[k] = v if k == "name" else int(v, 0)
        if words[0] == "mr":
            mr = kv
        elif words[0] == "pair":
            pairs[kv["name"]] = kv
    return mr, pairs


class Case:
    """What one case sends and expects.

    packets: (source, destination, RoCE bytes) tuples.
    expect: exact deltas of the victim device's counters; rcvd_pkts is the
      number of packets and sent_pkts the number of `responses` unless set.
    responses: the packets the victim must send back, in order, as
      (opcode, syndrome or None, PSN, payload or None) to the honest peer's
      QP; None: anything (not checked).
    ignore: counters whose delta is not checked.
    """

    def __init__(self, packets, expect, responses=(), ignore=(), qpn=None):
        self.packets, self.expect = packets, dict(expect)
        self.responses, self.ignore, self.qpn = list(responses), set(ignore), qpn
        self.expect.setdefault("rcvd_pkts", len(packets))
        self.expect.setdefault("sent_pkts", len(self.responses))


def live_cases(a, mr, pairs):
    """Every case of the live run, in order, as (name, Case)."""
    peer, spoof_src, victim, spoof_dst = a.src, a.spoof_src, a.dst, a.spoof_dst
    rkey = mr["v_rkey"]
    cases = []

    def pair(name):
        p = pairs[name]
        return p, p["vqpn"], p["v_epsn"], p["v_slice"]

    def add(name, *args, **kw):
        p = pairs.get(name)
        cases.append((name, Case(*args, qpn=p["pqpn"] if p else None, **kw)))

    # probe: valid SEND, WRITE and READ from the peer's address at the
    # expected PSNs are accepted (the injector itself is right): an ACK for
    # the SEND, the READ's data, the SEND's and WRITE's data checked by the
    # victim.
    p, q, e, va = pair("probe")
    read = req(RC_READ_REQ, q, e + 2, reth(va + mr["off_rd"], rkey, 100))
    add("probe", [
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=pattern(mr["probe_send_len"], 7, 3), ack=True)),
        (peer, victim, req(RC_WRITE_ONLY, q, e + 1, reth(va + mr["off_wrt"], rkey, mr["probe_write_len"]),
                           pattern(mr["probe_write_len"], 11, 1))),
        (peer, victim, read),
    ], {}, [(RC_ACK, "ack", e, None), (RC_READ_RESP_ONLY, "ack", e + 2, pattern(100, 13, 5))])
    # probe_replay: the same READ again is a duplicate of a remembered
    # request: replayed, not refused.
    add("probe_replay", [(peer, victim, read)], {"duplicate_request": 1},
        [(RC_READ_RESP_ONLY, "ack", e + 2, pattern(100, 13, 5))])
    # bad_icrc_large: packets of 512 bytes or more at the expected PSN, one
    # bit of their ICRC flipped: with two CPUs they go to the other CPU's
    # receive thread (src/engine/handover.rs), which must check the ICRC
    # before anything acts on them: dropped, counted, nothing written,
    # nothing answered (a WRITE taken would be ACKed). Then the same WRITE
    # intact is taken, so the PSN was still the expected one. (Its data
    # starts as the probe's WRITE did, which the victim checks at the end.)
    wlen = 1024
    bad = [
        (peer, victim, req(RC_WRITE_ONLY, q, e + 3, reth(va + mr["off_wrt"], rkey, wlen),
                           pattern(wlen, 11, 1), ack=True), True),
        (peer, victim, req(RC_SEND_ONLY, q, e + 3, payload=pattern(1000, 19, 3), ack=True), True),
    ]
    add("bad_icrc_large", bad, {"rcvd_bad_icrc": len(bad)})
    add("bad_icrc_large_then_good", [bad[0][:3]], {}, [(RC_ACK, "ack", e + 3, None)])

    def three(q, e, va, **kw):
        """A SEND, a WRITE into the guard region and a READ, at epsn."""
        return [
            req(RC_SEND_ONLY, q, e, payload=b"spoofed!" * 8, ack=True, **kw),
            req(RC_WRITE_ONLY, q, e, reth(va + mr["off_guard"], rkey, 32), b"W" * 32, ack=True, **kw),
            req(RC_READ_REQ, q, e, reth(va + mr["off_rd"], rkey, 64), ack=True, **kw),
        ]

    p, q, e, va = pair("spoof_src")
    add("spoof_src", [(spoof_src, victim, r) for r in three(q, e, va)], {"rcvd_bad_addr": 3})
    p, q, e, va = pair("spoof_dst")
    add("spoof_dst", [(peer, spoof_dst, r) for r in three(q, e, va)], {"rcvd_bad_addr": 3})

    p, q, e, va = pair("bad_pkey")
    add("bad_pkey", [
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=b"k" * 16, ack=True, pkey=0x1234)),
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=b"k" * 16, ack=True, pkey=0x8001)),
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=b"k" * 16, ack=True, pkey=0x0000)),
        (peer, victim, req(RC_WRITE_ONLY, q, e, reth(va + mr["off_guard"], rkey, 16), b"K" * 16,
                           ack=True, pkey=0x7FFE)),
    ], {"rcvd_bad_pkey": 4})

    # Duplicates (PSNs in the past half-window) of READs and atomics never
    # received: one with a valid key asks for 64 KiB of the MR.
    p, q, e, va = pair("dup_read")
    add("dup_read", [
        (peer, victim, req(RC_READ_REQ, q, e - 1, reth(va + mr["off_rd"], rkey, 4096))),
        (peer, victim, req(RC_READ_REQ, q, e - 100, reth(0x1000, 0x12345678, 64))),
        (peer, victim, req(RC_READ_REQ, q, e - 0x3FFFFF, reth(mr["v_va"], rkey, 65536))),
    ], {"rcvd_bad_dup": 3}, ignore={"duplicate_request"})
    p, q, e, va = pair("dup_atomic")
    add("dup_atomic", [
        (peer, victim, req(RC_FETCH_ADD, q, e - 1, atomic_eth(va + mr["off_guard"], rkey, 5))),
        (peer, victim, req(RC_CMP_SWAP, q, e - 2, atomic_eth(va + mr["off_guard"] + 8, rkey, 0xDEAD, 0))),
    ], {"rcvd_bad_dup": 2}, ignore={"duplicate_request"})

    # Middles and lasts ahead of the expected PSN: one PSN sequence NAK for
    # the gap, nothing placed.
    p, q, e, va = pair("oos_middle")
    add("oos_middle", [
        (peer, victim, req(RC_SEND_MIDDLE, q, e + 1, payload=b"m" * 1024)),
        (peer, victim, req(RC_SEND_LAST, q, e + 2, payload=b"l" * 100, ack=True)),
        (peer, victim, req(RC_WRITE_MIDDLE, q, e + 3, payload=b"w" * 1024)),
        (peer, victim, req(RC_SEND_ONLY, q, e + 10, payload=b"o" * 8, ack=True)),
    ], {"out_of_seq_request": 1}, [(RC_ACK, NAK_SEQ, e, None)])

    # Pad and length lies the parser sees (payload not a multiple of 4, pad
    # count beyond the payload, payload on a READ request or an ACK), at
    # the expected PSN: malformed, dropped.
    p, q, e, va = pair("pad_lies")
    add("pad_lies", [
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=b"x" * 6, pad=0, ack=True)),
        (peer, victim, req(RC_SEND_ONLY, q, e, payload=b"", pad=2, ack=True)),
        (peer, victim, req(RC_READ_REQ, q, e, reth(va + mr["off_rd"], rkey, 64), b"\0" * 4)),
        (peer, victim, req(RC_ACK, q, p["v_sq_psn"] - 1, aeth(SYN_ACK), b"\0" * 4)),
    ], {"rcvd_malformed": 4})
    # Responses for nothing outstanding (the victim's requester has sent
    # nothing): every ACK/NAK syndrome class, READ responses, an atomic ACK.
    p, q, e, va = pair("unexp_resp")
    s = p["v_sq_psn"]
    resp = [
        req(RC_ACK, q, s - 1, aeth(SYN_ACK)),
        req(RC_ACK, q, s, aeth(SYN_ACK)),
        req(RC_ACK, q, s + 5, aeth(SYN_ACK)),
        req(RC_ACK, q, s, aeth(SYN_RNR)),
    ] + [req(RC_ACK, q, s, aeth(n)) for n in (NAK_SEQ, NAK_INV_REQ, NAK_REM_ACCESS, NAK_REM_OP, NAK_INV_RD)] + [
        req(RC_READ_RESP_ONLY, q, s, aeth(SYN_ACK), b"r" * 64),
        req(RC_READ_RESP_FIRST, q, s, aeth(SYN_ACK), b"r" * 1024),
        req(RC_READ_RESP_MIDDLE, q, s + 1, payload=b"r" * 1024),
        req(RC_READ_RESP_LAST, q, s + 2, aeth(SYN_ACK), b"r" * 12),
        req(RC_ATOMIC_ACK, q, s, aeth(SYN_ACK) + struct.pack("!Q", 0x1122334455667788)),
    ]
    add("unexp_resp", [(peer, victim, r) for r in resp], {"rcvd_unexpected_resp": len(resp)})

    # UD and UC opcodes at the RC QP; an RC SEND at the GSI QP (QP1).
    p, q, e, va = pair("wrong_type")
    add("wrong_type", [
        (peer, victim, req(UD_SEND_ONLY, q, e, deth(0x11111111, 0x1234), b"u" * 16)),
        (peer, victim, req(UC_SEND_ONLY, q, e, payload=b"c" * 16)),
        (peer, victim, req(UC_WRITE_ONLY, q, e, reth(va + mr["off_guard"], rkey, 16), b"C" * 16)),
    ], {"rcvd_bad_opcode": 3})
    add("rc_to_gsi", [(peer, victim, req(RC_SEND_ONLY, 1, 0, payload=b"g" * 16, ack=True))],
        {"rcvd_bad_opcode": 1})

    # NAK invalid request (each on its own QP: the responder then goes to
    # the error state).
    p, q, e, va = pair("nak_huge_read")
    add("nak_huge_read", [(peer, victim, req(RC_READ_REQ, q, e, reth(va + mr["off_rd"], rkey, 0x80000001)))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    p, q, e, va = pair("nak_rd_atomic")  # max_dest_rd_atomic 0
    add("nak_rd_atomic", [(peer, victim, req(RC_READ_REQ, q, e, reth(va + mr["off_rd"], rkey, 64)))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    p, q, e, va = pair("nak_send_inv")
    add("nak_send_inv", [(peer, victim, req(RC_SEND_ONLY_INV, q, e, struct.pack("!I", rkey), b"i" * 16,
                                            ack=True))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    p, q, e, va = pair("nak_seq_middle")
    add("nak_seq_middle", [(peer, victim, req(RC_SEND_MIDDLE, q, e, payload=b"m" * 1024))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    # Lengths that break the path MTU (1024) rules: a responder length
    # error, as rxe's check_length: NAK invalid request, not a drop.
    p, q, e, va = pair("nak_over_mtu")
    add("nak_over_mtu", [(peer, victim, req(RC_SEND_ONLY, q, e, payload=b"o" * 1100, ack=True))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    p, q, e, va = pair("nak_short_first")
    add("nak_short_first", [(peer, victim, req(RC_SEND_FIRST, q, e, payload=b"f" * 512))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    p, q, e, va = pair("nak_write_over_mtu")
    add("nak_write_over_mtu", [(peer, victim, req(RC_WRITE_ONLY, q, e, reth(va + mr["off_guard"], rkey, 1100),
                                                  b"O" * 1100, ack=True))],
        {"sent_nak_inv_req": 1}, [(RC_ACK, NAK_INV_REQ, e, None)])
    return cases


def result(name, ok, why):
    print("CHECK %s %s%s" % ("ok" if ok else "fail", name, "" if ok else ": " + why), flush=True)
    return ok


def response_matches(want, got, qpn):
    op, syn, p, payload = want
    if got["op"] != op or got["psn"] != psn(p) or (qpn is not None and got["qpn"] != qpn):
        return False
    if syn == "ack":
        if got["syn"] is None or got["syn"] >> 5 != 0:
            return False
    elif syn is not None and got["syn"] != syn:
        return False
    return payload is None or got["payload"] == payload


# Where a packet was processed, not what became of it: a packet of 512
# bytes or more goes to another CPU's receive thread when the guest has
# one (src/engine/handover.rs), and that thread's queue may be full. The
# verdict is checked the same either way (counters, responses).
WHERE_COUNTERS = ("rcvd_handed",)


def run_case(a, wire, cap, name, case):
    if a.paged:
        # The receive path pulls the UDP header and the longest RoCE
        # headers into the linear part: a packet whose UDP payload is
        # longer keeps the rest in its page fragment and is read in pieces.
        case.expect.setdefault("rcvd_paged", sum(
            1 for pkt in case.packets if len(pkt[2]) + 4 > ROCE_PULL))
    before, peer_before = counters(a.victim_dev), counters(a.peer_dev)
    cap.drain()
    for pkt in case.packets:
        wire.send(*pkt)
        time.sleep(0.02)
    time.sleep(a.settle)
    got = cap.collect()
    after, peer_after = counters(a.victim_dev), counters(a.peer_dev)
    delta = {k: after[k] - before[k] for k in after if k in before}
    full = "victim deltas: " + " ".join("%s=%+d" % (k, v) for k, v in delta.items() if v) + ";"
    tag = a.tag + "." + name
    ok = True
    missing = [k for k in case.expect if k not in delta]
    wrong = ["%s %+d, want %+d" % (k, delta.get(k, 0), v)
             for k, v in case.expect.items() if k not in ("sent_pkts",) and delta.get(k, 0) != v]
    ok &= result(tag + ".counted", not missing and not wrong,
                 ("counter(s) missing: %s " % " ".join(missing) if missing else "")
                 + "; ".join(wrong) + " (" + full + ")")
    want_sent = case.expect["sent_pkts"]
    match = len(got) == len(case.responses) and all(
        response_matches(w, g, case.qpn) for w, g in zip(case.responses, got))
    ok &= result(tag + ".responses", match and delta.get("sent_pkts") == want_sent,
                 "sent_pkts %+d, want %+d; sent %s; want %s" % (
                     delta.get("sent_pkts", 0), want_sent, describe(got),
                     [(hex(o), s if s in (None, "ack") else hex(s), hex(psn(p))) for o, s, p, _ in case.responses]))
    others = ["%s %+d" % (k, v) for k, v in delta.items()
              if v and k not in case.expect and k not in case.ignore and k not in WHERE_COUNTERS]
    ok &= result(tag + ".other_counters_quiet", not others, " ".join(others))
    peer_delta = {k: peer_after[k] - peer_before.get(k, 0) for k in peer_after if peer_after[k] != peer_before.get(k, 0)}
    print("INFO %s: %d packet(s) sent; %s peer device deltas: %s" % (
        name, len(case.packets), full, " ".join("%s=%+d" % kv for kv in peer_delta.items()) or "none"), flush=True)
    return ok


def live(argv):
    ap = argparse.ArgumentParser(prog="roce_inject.py live")
    ap.add_argument("state")
    ap.add_argument("--iface", default="v1")
    ap.add_argument("--src", default="2001:db8::2")
    ap.add_argument("--spoof-src", default="2001:db8::3")
    ap.add_argument("--dst", default="2001:db8::1")
    ap.add_argument("--spoof-dst", default="2001:db8::4")
    ap.add_argument("--victim-dev", default="rroce0")
    ap.add_argument("--peer-dev", default="rroce1")
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--only", default="")
    ap.add_argument("--paged", action="store_true",
                    help="send every packet with its UDP payload in a page fragment")
    ap.add_argument("--tag", default="hostile_peer", help="prefix of the check names")
    a = ap.parse_args(argv)
    mr, pairs = read_state(a.state)
    wire, cap = Wire(a.paged), Capture(a.iface, a.dst)
    only = set(filter(None, a.only.split(",")))
    failed = 0
    for name, case in live_cases(a, mr, pairs):
        if not only or name in only:
            try:
                failed += not run_case(a, wire, cap, name, case)
            except OSError as e:
                failed += not result("%s.%s.counted" % (a.tag, name), False, "injector: %s" % e)
    print("injector: %d case(s) failed" % failed, flush=True)
    return 1 if failed else 0


main()
