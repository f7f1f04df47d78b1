#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Build RoCEv2 frames with scapy (scapy.contrib.roce) from a field list.

Usage: wire_scapy_frames.py SPEC OUT.pcap

SPEC has one frame per line, `key=value` tokens (integers in hex or decimal,
byte strings in hex); test_wire_scapy.c writes it from the same descriptors it
gives rocemu's builder, then compares the two encodings byte for byte.

The encoding here is independent of rocemu: scapy lays out Ethernet, 802.1Q,
IPv4/IPv6, UDP and the BTH and computes the IPv4 ICRC; the extension headers
(which scapy's RoCE layer does not model) are packed with struct from the IBA
field layouts. scapy 2.5 computes no ICRC for IPv6 (it warns and writes 0), so
for IPv6 this script computes it from the annex's definition with zlib.crc32:
8 bytes of 0xFF, then IPv6 header with traffic class, flow label and hop limit
set to ones, UDP with checksum set to ones, BTH with resv8a set to ones, the
rest; stored least significant byte first, as scapy does for IPv4.

Exits 77 when scapy or its RoCE layer is missing.
"""
import struct
import sys
import zlib

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, Raw, wrpcap, raw
    from scapy.contrib.roce import BTH
except ImportError as e:  # pragma: no cover
    print("SKIP: scapy with scapy.contrib.roce is not available: %s" % e)
    sys.exit(77)

# Extension headers present after the BTH, in IBA order (9.2).
RETH, AETH, ATOMIC, ATOMIC_ACK, IMMDT, IETH, DETH, FETH, XRCETH = range(9)
RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12)


def ext_headers(op):
    t, o = op & 0xE0, op & 0x1F
    if op == 0x81:
        return []
    if t == 0x60:
        return [DETH] + ([IMMDT] if o == 0x05 else [])
    table = {
        0x03: [IMMDT], 0x05: [IMMDT],
        0x06: [RETH], 0x09: [IMMDT], 0x0A: [RETH], 0x0B: [RETH, IMMDT],
        0x0C: [RETH], 0x0D: [AETH], 0x0F: [AETH], 0x10: [AETH], 0x11: [AETH],
        0x12: [AETH, ATOMIC_ACK], 0x13: [ATOMIC], 0x14: [ATOMIC],
        0x16: [IETH], 0x17: [IETH],
        # annex A19: FLUSH is BTH | FETH | RETH, ATOMIC WRITE BTH | RETH | 8 bytes
        0x1C: [FETH, RETH], 0x1D: [RETH],
    }
    hdrs = table.get(o, [])
    # XRC (IBA 9.3.8): every request starts with the XRCETH after the BTH
    if t == 0xA0 and o not in RESPONSES:
        hdrs = [XRCETH] + hdrs
    return hdrs


def pack_ext(op, f):
    out = b""
    for h in ext_headers(op):
        if h == RETH:
            out += struct.pack("!QII", f["reth_va"], f["reth_rkey"], f["reth_len"])
        elif h == AETH:
            out += struct.pack("!B", f["aeth_syn"]) + f["aeth_msn"].to_bytes(3, "big")
        elif h == ATOMIC:
            out += struct.pack("!QIQQ", f["atomic_va"], f["atomic_rkey"],
                               f["atomic_swap"], f["atomic_cmp"])
        elif h == ATOMIC_ACK:
            out += struct.pack("!Q", f["atomic_orig"])
        elif h == IMMDT:
            out += struct.pack("!I", f["imm"])
        elif h == IETH:
            out += struct.pack("!I", f["ieth_rkey"])
        elif h == DETH:
            out += struct.pack("!IB", f["qkey"], 0) + f["src_qp"].to_bytes(3, "big")
        elif h == FETH:
            out += struct.pack("!I", f["feth"])
        elif h == XRCETH:
            out += struct.pack("!B", 0) + f["xrc_srqn"].to_bytes(3, "big")
    return out


def ipv6_icrc(frame, l3_off):
    """ICRC per RoCEv2 annex A17 for an IPv6 frame (scapy 2.5 has none)."""
    pkt = bytearray(frame[l3_off:-4])
    pkt[0] |= 0x0F              # traffic class (high nibble) ...
    pkt[1:4] = b"\xff\xff\xff"  # ... traffic class (low nibble) and flow label
    pkt[7] = 0xFF               # hop limit
    pkt[40 + 6:40 + 8] = b"\xff\xff"  # UDP checksum
    pkt[48 + 4] = 0xFF          # BTH resv8a
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(pkt)) & 0xFFFFFFFF)


def build(f):
    eth = Ether(dst=f["dst_mac"], src=f["src_mac"])
    if f["vlan"]:
        tci = f["vlan_tci"]
        eth = eth / Dot1Q(prio=tci >> 13, id=(tci >> 12) & 1, vlan=tci & 0xFFF)
    if f["ipv"] == 4:
        ip = IP(version=4, ihl=5, tos=f["tclass"], id=f["ip_id"], flags="DF", frag=0,
                ttl=f["ttl"], proto=17, src=f["src_ip"], dst=f["dst_ip"])
    else:
        ip = IPv6(tc=f["tclass"], fl=f["flow_label"], nh=17, hlim=f["ttl"],
                  src=f["src_ip"], dst=f["dst_ip"])
    payload = f["payload"]
    pad = (4 - len(payload) % 4) % 4
    bth = BTH(opcode=f["opcode"], solicited=f["se"], migreq=f["mig"], padcount=pad,
              version=0, pkey=f["pkey"], fecn=f["fecn"], becn=f["becn"], resv6=f["resv6"],
              dqpn=f["dqpn"], ackreq=f["ackreq"], resv7=f["resv7"], psn=f["psn"])
    body = pack_ext(f["opcode"], f) + payload + b"\x00" * pad
    # udp_csum=-1: let scapy compute the UDP checksum (over the final ICRC)
    csum = None if f["udp_csum"] < 0 else f["udp_csum"]
    pkt = eth / ip / UDP(sport=f["sport"], dport=4791, chksum=csum) / bth / Raw(body)
    if f["ipv"] == 6:
        # scapy leaves the IPv6 ICRC 0: compute it, then build again with it
        # in place so that a scapy-computed UDP checksum covers it.
        l3_off = 18 if f["vlan"] else 14
        icrc = ipv6_icrc(raw(pkt), l3_off)
        pkt[BTH].icrc = int.from_bytes(icrc, "big")
    return raw(pkt)


def parse_spec_line(line):
    f = {}
    for tok in line.split():
        k, v = tok.split("=", 1)
        if k in ("dst_mac", "src_mac"):
            f[k] = ":".join(v[i:i + 2] for i in range(0, 12, 2))
        elif k in ("src_ip", "dst_ip"):
            f[k] = v
        elif k == "payload":
            f[k] = bytes.fromhex(v) if v != "-" else b""
        else:
            f[k] = int(v, 0)
    return f


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    frames = []
    with open(sys.argv[1]) as spec:
        for line in spec:
            if line.strip():
                frames.append(build(parse_spec_line(line)))
    # raw bytes, so that nothing is re-encoded on the way to the file
    wrpcap(sys.argv[2], frames, linktype=1)
    print("wrote %d frames to %s" % (len(frames), sys.argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
