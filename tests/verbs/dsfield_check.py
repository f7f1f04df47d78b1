#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""dsfield_check.py WANT FILE: FILE holds tshark's fields `ip.dsfield ip.src
infiniband.bth.destqp`, one RoCEv2 frame per line, from the capture of a run
in which one connection set its traffic class to WANT (rdma_set_option TOS)
and others may not have (perftest's own control connection). Checks that
every frame of the busiest QP in each direction (the data connection's)
carries WANT, that at least two CM MADs (destination QP 1) do, and that every
frame carries WANT's two ECN bits. Exit 0 or 1 with the reasons."""
import collections, sys
want = int(sys.argv[1])
rows = [l.split() for l in open(sys.argv[2]) if l.strip()]
per = collections.Counter((r[1], r[2]) for r in rows if r[2] != "0x000001")
top = {}
for (src, qp), n in per.items():
    if n > per.get(top.get(src), 0):
        top[src] = (src, qp)
err = []
if len(top) != 2:
    err.append(f"data in {len(top)} directions, expected 2")
for k in top.values():
    bad = sum(1 for r in rows if (r[1], r[2]) == k and int(r[0], 16) != want)
    if bad:
        err.append(f"{bad} frames of {k} (the data QP) without it")
ecn = sum(1 for r in rows if int(r[0], 16) % 4 != want % 4)
if ecn:
    err.append(f"{ecn} frames with other ECN bits")
mads = sum(1 for r in rows if r[2] == "0x000001" and int(r[0], 16) == want)
if mads < 2:
    err.append(f"{mads} CM MADs with it, expected >= 2")
for e in err:
    print("  " + e)
sys.exit(1 if err else 0)
