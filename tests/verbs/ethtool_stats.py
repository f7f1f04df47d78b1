#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""ethtool_stats.py IFACE: the interface's driver statistics (`ethtool -S`),
one "name value" a line, read with the ETHTOOL_GDRVINFO, ETHTOOL_GSTRINGS
and ETHTOOL_GSTATS ioctls (the ethtool program is not installed here).
veth counts per queue: rx_queue_N_xdp_redirect is how many frames the XDP
program on receive queue N redirected (to an AF_XDP socket)."""
import array
import fcntl
import socket
import struct
import sys

SIOCETHTOOL = 0x8946
GDRVINFO, GSTRINGS, GSTATS = 0x03, 0x1B, 0x1D
ETH_SS_STATS, GSTRING_LEN = 1, 32


def ethtool(sock, ifname, buf):
    ifr = struct.pack("16sP", ifname.encode(), buf.buffer_info()[0])
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifr)


def main():
    ifname = sys.argv[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    drv = array.array("B", struct.pack("I", GDRVINFO) + bytes(192))
    ethtool(sock, ifname, drv)
    (n,) = struct.unpack_from("I", drv.tobytes(), 180)  # n_stats
    strs = array.array("B", struct.pack("III", GSTRINGS, ETH_SS_STATS, n) + bytes(n * GSTRING_LEN))
    ethtool(sock, ifname, strs)
    vals = array.array("B", struct.pack("II", GSTATS, n) + bytes(n * 8))
    ethtool(sock, ifname, vals)
    raw_names, raw_vals = strs.tobytes()[12:], vals.tobytes()[8:]
    for i in range(n):
        name = raw_names[i * GSTRING_LEN:(i + 1) * GSTRING_LEN].split(b"\0")[0].decode()
        print(name, struct.unpack_from("Q", raw_vals, i * 8)[0])


main()
