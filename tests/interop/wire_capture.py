#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""wire_capture.py IFACE FILE: every frame that crosses IFACE, both
directions, into the pcap FILE, until SIGINT or SIGTERM; then whatever the
socket still holds, then exit 0. Prints "capturing on IFACE" once the socket
is bound (frames from then on are recorded) and, at the end, "frames: N" and
"dropped: D" (frames the kernel could not queue to the socket).

Why not dumpcap: libpcap's TPACKET_V3 ring hands frames over a block at a
time, and dumpcap stops without reading the block the kernel still fills.
The interop bed's VLAN round (interop_rxe.sh) lost frames that way on
loaded machines: all of a case's in a CI run (dumpcap: "received 0"), 67
of the 89 that tap0's counters showed in a run here. A plain packet socket
returns each frame on its own, and on a signal this program drains the
socket before it exits. It is for the interop cases' few hundred frames:
at bulk rates a Python reader falls behind and the kernel drops (counted).

VLAN tags: the kernel moves a received frame's 802.1Q tag into the packet's
metadata before packet sockets see it; PACKET_AUXDATA returns it and it is
put back into the frame here, as libpcap does, so tshark sees the tag and
its priority bits."""
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
AUX = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata

stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def with_tag(frame, cmsgs):
    for level, kind, data in cmsgs:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < AUX.size:
            continue
        status, _, _, _, _, tci, tpid = AUX.unpack_from(data)
        if status & TP_STATUS_VLAN_VALID and len(frame) >= 12:
            if not status & TP_STATUS_VLAN_TPID_VALID or tpid == 0:
                tpid = 0x8100
            return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


def main():
    args = sys.argv[1:]
    if len(args) != 2:
        sys.stderr.write("usage: wire_capture.py IFACE FILE\n")
        return 2
    iface, path = args
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:  # root may exceed net.core.rmem_max
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
    except PermissionError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    out = open(path, "wb")
    # pcap global header: microseconds, snaplen 65535, Ethernet
    out.write(struct.pack("=IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    out.flush()
    print("capturing on %s" % iface, flush=True)
    n = 0
    s.settimeout(0.1)
    while True:
        if stop:
            s.settimeout(0.0)  # drain what the socket holds, then stop
        try:
            frame, cmsgs, _, _ = s.recvmsg(65535, socket.CMSG_SPACE(AUX.size))
        except (BlockingIOError, socket.timeout):
            if stop:
                break
            continue
        except InterruptedError:
            continue
        frame = with_tag(frame, cmsgs)
        t = time.time()
        out.write(struct.pack("=IIII", int(t), int((t % 1) * 1e6), len(frame), len(frame)))
        out.write(frame)
        out.flush()
        n += 1
    out.close()
    # struct tpacket_stats: since the last read, which was none
    _, drops = struct.unpack("=II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    print("frames: %d" % n, flush=True)
    print("dropped: %d (the socket's buffer was full)" % drops, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
