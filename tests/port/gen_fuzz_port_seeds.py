#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Seed corpus of fuzz_port (tests/port/fuzz_port.c): ARP, ND and ICMP
frames a neighbour sends, as records [flags][len LE16][frame]. Flags 0xC0:
aimed at the port (MAC, addresses) and checksums fixed by the target; the
low bits ask for an action first (1 resolve, 2 ping, 3 timers, 4 wait, 5
resolve all). usage: gen_fuzz_port_seeds.py DIR"""
import os
import struct
import sys

ME = bytes(6)                       # rewritten by the target (flag 0x40)
PEER = bytes.fromhex('020000810002')
BCAST = b'\xff' * 6
V4_ME, V4_PEER = bytes([10, 81, 0, 1]), bytes([10, 81, 0, 2])
V6_ME = bytes.fromhex('fd000081000000000000000000000001')
V6_PEER = bytes.fromhex('fd000081000000000000000000000002')


def eth(dst, typ):
    return dst + PEER + struct.pack('>H', typ)


def arp(op, sha, sip, tha, tip, dst=BCAST):
    return eth(dst, 0x0806) + struct.pack('>HHBBH', 1, 0x0800, 6, 4, op) + sha + sip + tha + tip + bytes(18)


def ipv6(src, dst, payload, nh=58):
    return eth(ME, 0x86dd) + struct.pack('>IHBB', 6 << 28, len(payload), nh, 255) + src + dst + payload


def nd(typ, flags, target, opt, lla):
    body = struct.pack('>BBHB3x', typ, 0, 0, flags) + target
    if opt:
        body += bytes([opt, 1]) + lla
    return body


def ipv4(src, dst, payload, proto=1):
    return eth(ME, 0x0800) + struct.pack('>BBHHHBBH', 0x45, 0, 20 + len(payload), 1, 0x4000, 64, proto, 0) + src + dst + payload


def echo(typ, ident, seq):
    return struct.pack('>BBHHH', typ, 0, 0, ident, seq) + bytes(range(56))


def rec(flags, frame):
    return bytes([flags]) + struct.pack('<H', len(frame)) + frame


SEEDS = {
    'arp-request': rec(0xE0, arp(1, PEER, V4_PEER, bytes(6), V4_ME)),
    'arp-resolve-reply': rec(0x01, arp(1, PEER, V4_ME, bytes(6), V4_PEER)) +
    rec(0xC0, arp(2, PEER, V4_PEER, ME, V4_ME, dst=ME)),
    'arp-gratuitous-then-use': rec(0xE0, arp(1, PEER, V4_PEER, bytes(6), V4_PEER)) +
    rec(0xE5, arp(1, PEER, V4_PEER, bytes(6), V4_ME)),
    'arp-redirect-race': rec(0x01, arp(1, PEER, V4_ME, bytes(6), V4_PEER)) +
    rec(0xC0, arp(2, PEER, V4_PEER, ME, V4_ME, dst=ME)) +
    rec(0xC4, arp(2, bytes.fromhex('026666666666'), V4_PEER, ME, V4_ME, dst=ME)),
    'nd-ns-slla': rec(0xC0, ipv6(V6_PEER, V6_ME, nd(135, 0, V6_ME, 1, PEER))),
    'nd-resolve-na': rec(0x01, ipv6(V6_PEER, V6_ME, nd(135, 0, V6_PEER, 0, b''))) +
    rec(0xC0, ipv6(V6_PEER, V6_ME, nd(136, 0x60, V6_PEER, 2, PEER))),
    'nd-na-override': rec(0xC0, ipv6(V6_PEER, V6_ME, nd(136, 0x20, V6_PEER, 2, bytes.fromhex('026666666666')))),
    'nd-dad': rec(0xC0, ipv6(bytes(16), bytes.fromhex('ff0200000000000000000001ff000001'), nd(135, 0, V6_ME, 0, b''))),
    'icmp-echo': rec(0xC0, ipv4(V4_PEER, V4_ME, echo(8, 7, 1))),
    'icmp-ping-reply': rec(0xC2, ipv4(V4_PEER, V4_ME, echo(0, 0x4242, 0))),
    'icmp6-echo': rec(0xC0, ipv6(V6_PEER, V6_ME, echo(128, 7, 1))),
    'icmp-flood': b''.join(rec(0xC0, ipv4(V4_PEER, V4_ME, echo(8, 7, i))) for i in range(30)),
    'timers': rec(0x01, arp(1, PEER, V4_ME, bytes(6), V4_PEER)) + rec(0x04, b'') + rec(0x03, b''),
}

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
