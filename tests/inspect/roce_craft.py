# SPDX-License-Identifier: BSD-3-Clause
"""Build RoCEv2 frames and pcap/pcapng files for the inspector's tests.

Independent of the rocemu codec on purpose: headers are packed here with
struct, and the ICRC is computed here from the RoCEv2 annex (A17.3.3) with
zlib's CRC-32, so a test compares two implementations. `icrc_ok()` is also
checked against scapy's RoCE layer in test_inspect_crafted.py.
"""
import struct
import zlib

ROCE_PORT = 4791

# opcode numbers (IBA table 38), RC unless noted
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
READ_REQUEST, READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST, READ_RESP_ONLY = (
    0x0C, 0x0D, 0x0E, 0x0F, 0x10)
ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD = 0x11, 0x12, 0x13, 0x14
UC_SEND_ONLY = 0x24
UD_SEND_ONLY = 0x64
CNP = 0x81

RETH_OPS = {WRITE_FIRST, WRITE_ONLY, READ_REQUEST, 0x0B, 0x26, 0x2A, 0x2B}
AETH_OPS = {READ_RESP_FIRST, READ_RESP_LAST, READ_RESP_ONLY, ACK, ATOMIC_ACK}
ATOMIC_OPS = {CMP_SWAP, FETCH_ADD}

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276


def ip_bytes(addr):
    """'10.0.0.1' -> 4 bytes, 'fd00::1' -> 16 bytes."""
    import ipaddress
    return ipaddress.ip_address(addr).packed


def _csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def icrc(ip_datagram_without_icrc):
    """ICRC over an IP datagram (IP header .. payload+pad, no ICRC).

    Variant fields are replaced by ones (A17.3.3): IPv4 TOS, TTL, checksum;
    IPv6 traffic class, flow label, hop limit; UDP checksum; BTH resv8a
    (FECN/BECN). Eight bytes of ones stand for the LRH. Returned as the 4
    bytes that go on the wire."""
    whole = memoryview(ip_datagram_without_icrc)
    # only the headers up to the BTH are masked; the rest is summed in place
    head = ((whole[0] & 0xF) * 4 if whole[0] >> 4 == 4 else 40) + 8 + 12
    d = bytearray(whole[:head])
    if d[0] >> 4 == 4:
        ihl = (d[0] & 0xF) * 4
        d[1] = 0xFF
        d[8] = 0xFF
        d[10:12] = b"\xff\xff"
        udp = ihl
    else:
        d[0] |= 0x0F
        d[1] = 0xFF
        d[2] = 0xFF
        d[3] = 0xFF
        d[7] = 0xFF
        udp = 40
    d[udp + 6:udp + 8] = b"\xff\xff"
    d[udp + 8 + 4] = 0xFF
    crc = zlib.crc32(whole[head:], zlib.crc32(b"\xff" * 8 + bytes(d))) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def icrc_ok(ip_datagram):
    return icrc(ip_datagram[:-4]) == ip_datagram[-4:]


def bth(opcode, dqpn, psn, ackreq=False, pad=0, se=False, fecn=False, becn=False, pkey=0xFFFF):
    b1 = (0x80 if se else 0) | (pad << 4)
    b4 = (0x80 if fecn else 0) | (0x40 if becn else 0)
    return struct.pack("!BBHB", opcode, b1, pkey, b4) + dqpn.to_bytes(3, "big") + \
        bytes([0x80 if ackreq else 0]) + psn.to_bytes(3, "big")


def reth(va=0x1000, rkey=0x1234, length=0):
    return struct.pack("!QII", va, rkey, length)


def aeth(syndrome=0x1F, msn=0):
    return bytes([syndrome]) + msn.to_bytes(3, "big")


def deth(qkey, src_qp):
    return struct.pack("!I", qkey) + b"\0" + src_qp.to_bytes(3, "big")


def atomic_eth(va=0x2000, rkey=0x99, swap_add=1, compare=0):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def roce_ip(src, dst, sport, bth_and_ext, payload=b"", ecn=0, corrupt_icrc=False, ttl=64):
    """IP/UDP/BTH/ext/payload/pad/ICRC datagram."""
    pad = (-len(payload)) % 4
    body = bytearray(bth_and_ext)
    body[1] = (body[1] & 0xCF) | (pad << 4)
    body = bytes(body) + payload + b"\0" * pad
    udp_len = 8 + len(body) + 4
    udp = struct.pack("!HHHH", sport, ROCE_PORT, udp_len, 0)
    s, d = ip_bytes(src), ip_bytes(dst)
    if len(s) == 4:
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, ecn & 3, 20 + udp_len, 0, 0x4000, ttl, 17, 0, s, d)
        hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    else:
        hdr = struct.pack("!IHBB16s16s", (6 << 28) | ((ecn & 3) << 20), udp_len, 17, ttl, s, d)
    dg = hdr + udp + body
    crc = icrc(dg)
    if corrupt_icrc:
        crc = bytes([crc[0] ^ 0x5A]) + crc[1:]
    return dg + crc


def ether(ip_datagram, vlan=None, src_mac=b"\x02\0\0\0\0\x01", dst_mac=b"\x02\0\0\0\0\x02"):
    etype = 0x0800 if ip_datagram[0] >> 4 == 4 else 0x86DD
    # vlan: a VLAN ID, or a list of (TPID, VID) for stacked tags (QinQ)
    tags = [] if vlan is None else ([(0x8100, vlan)] if isinstance(vlan, int) else vlan)
    tag = b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in tags)
    frame = dst_mac + src_mac + tag + struct.pack("!H", etype) + ip_datagram
    if len(frame) < 60:
        frame += b"\0" * (60 - len(frame))
    return frame


# rocemu's annotation frames (emulator/port/README.md, "Capture"): EtherType
# 0x88B5 (IEEE 802 local experimental), "RCMU", version 1, type, body length
ANNOT_ETHERTYPE = 0x88B5
ANNOT_CAPTURE_POINT, ANNOT_LOST_TX, ANNOT_LOST_RX = 1, 2, 3


def annotation(atype, body, src_mac=b"\x02\0\0\0\0\x01", dst_mac=b"\x02\0\0\0\0\x01"):
    return (dst_mac + src_mac + struct.pack("!H", ANNOT_ETHERTYPE) + b"RCMU" +
            struct.pack("!BBH", 1, atype, len(body)) + body)


def capture_point(addrs, name=b"rocemu0", mac=b"\x02\0\0\0\0\x01"):
    """The record rocemu writes first in a capture: which port captured it."""
    import ipaddress
    gids = b""
    for a in addrs:
        ip = ipaddress.ip_address(a)
        gids += (b"\0" * 10 + b"\xff\xff" + ip.packed) if ip.version == 4 else ip.packed
    body = mac + struct.pack("!BB", len(addrs), 0) + gids + name
    return annotation(ANNOT_CAPTURE_POINT, body, mac, mac)


def lost_frame(frame, on_receive=False):
    """A frame the fault injector dropped, as rocemu records it."""
    return annotation(ANNOT_LOST_RX if on_receive else ANNOT_LOST_TX, frame, frame[6:12],
                      frame[0:6])


def link_frame(ip_datagram, linktype, vlan=None):
    etype = 0x0800 if ip_datagram[0] >> 4 == 4 else 0x86DD
    if linktype == LINKTYPE_ETHERNET:
        return ether(ip_datagram, vlan)
    if linktype == LINKTYPE_RAW:
        return ip_datagram
    if linktype == LINKTYPE_LINUX_SLL:
        # packet type, ARPHRD_ETHER, address length, address (8), protocol
        return struct.pack("!HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", etype) + ip_datagram
    if linktype == LINKTYPE_LINUX_SLL2:
        # protocol, reserved, ifindex, ARPHRD_ETHER, packet type, addr len, addr (8)
        return struct.pack("!HHIHBB8s", etype, 0, 2, 1, 0, 6, b"\x02\0\0\0\0\x01\0\0") + ip_datagram
    raise ValueError(linktype)


class Pcap:
    """Write a classic pcap with nanosecond timestamps, one record at a time.

    add(frame, t_ns, caplen=None): caplen below len(frame) cuts the record as
    a capture snaplen would (the record keeps the original length)."""

    def __init__(self, path, linktype=LINKTYPE_ETHERNET, snaplen=262144):
        self.f = open(path, "wb")
        self.f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype))
        self.n = 0

    def add(self, frame, t_ns, caplen=None):
        cap = len(frame) if caplen is None else min(caplen, len(frame))
        self.f.write(struct.pack("<IIII", t_ns // 1000000000, t_ns % 1000000000, cap, len(frame)))
        self.f.write(frame[:cap])
        self.n += 1
        return self.n  # frame number, as Wireshark counts

    def close(self):
        self.f.close()


def write_pcapng(path, frames, linktype=LINKTYPE_ETHERNET):
    """frames: list of (frame bytes, t_ns). Nanosecond resolution (if_tsresol 9)."""
    def block(btype, body):
        body += b"\0" * ((-len(body)) % 4)
        ln = 12 + len(body)
        return struct.pack("<II", btype, ln) + body + struct.pack("<I", ln)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opt = struct.pack("<HHB", 9, 1, 9) + b"\0\0\0" + struct.pack("<HH", 0, 0)
    out += block(0x00000001, struct.pack("<HHI", linktype, 0, 262144) + opt)
    for frame, t in frames:
        out += block(0x00000006, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF,
                                             len(frame), len(frame)) + frame)
    with open(path, "wb") as f:
        f.write(out)


class Conversation:
    """An RC (or UC) QP pair between two hosts, to script packets in order.

    Requests go A -> B with DQPN = qp_b, responses B -> A with DQPN = qp_a.
    The UDP source port is the same both ways (as rxe does)."""

    def __init__(self, a="10.0.0.1", b="10.0.0.2", qp_a=0x000101, qp_b=0x000202,
                 sport=0xC123, vlan=None):
        self.a, self.b, self.qp_a, self.qp_b = a, b, qp_a, qp_b
        self.sport, self.vlan = sport, vlan

    def req(self, opcode, psn, payload=b"", ackreq=False, ext=b"", **kw):
        return roce_ip(self.a, self.b, self.sport,
                       bth(opcode, self.qp_b, psn, ackreq) + ext, payload, **kw)

    def resp(self, opcode, psn, syndrome=0x1F, msn=0, payload=b"", ext=b"", **kw):
        return roce_ip(self.b, self.a, self.sport,
                       bth(opcode, self.qp_a, psn) + aeth(syndrome, msn) + ext, payload, **kw)

    def write_only(self, psn, n=256, **kw):
        return self.req(WRITE_ONLY, psn, bytes(n), True, reth(length=n), **kw)

    def ack(self, psn, msn=0, **kw):
        return self.resp(ACK, psn, 0x1F, msn, **kw)

    def nak_seq(self, psn, msn=0):
        return self.resp(ACK, psn, 0x60, msn)  # NAK, code 0: PSN sequence error

    def rnr_nak(self, psn, timer, msn=0):
        return self.resp(ACK, psn, 0x20 | timer, msn)
