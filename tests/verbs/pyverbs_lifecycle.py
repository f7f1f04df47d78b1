#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""pyverbs opens, closes and reopens rocemu devices in one process, as
pyverbs scripts and test suites do (issues 14.1, 20.2): run under
`rocemu run --config` with the devices srv (memif server), cli (its client)
and ra, rb (a ring pair). Each round lists the devices, opens each, queries
it, makes a PD, a CQ and a QP, and closes it; the GUID the list gives is the
one the device reports; the server is closed and opened again while the
client stays; two contexts of one device share its engine. Exits 0 when all
of it worked, 1 with the first failure."""
import sys

import pyverbs.device as d
from pyverbs.cq import CQ
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
import pyverbs.enums as e

ROUNDS = 5


def use(ctx, name, guid):
    attr = ctx.query_device()
    # pyverbs gives Device.guid in host order, DeviceAttr.node_guid as
    # the big-endian value libibverbs returns
    node = int.from_bytes(attr.node_guid.to_bytes(8, 'little'), 'big')
    if node != guid:
        raise AssertionError(f'{name}: node_guid {node:#x} != listed guid {guid:#x}')
    port = ctx.query_port(1)
    if port.state != e.IBV_PORT_ACTIVE:
        raise AssertionError(f'{name}: port state {port.state}')
    ctx.query_gid(1, 1)
    with PD(ctx) as pd, CQ(ctx, 16) as cq:
        cap = QPCap(max_send_wr=4, max_recv_wr=4)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        qp.close()


def listed():
    return {dev.name.decode(): dev.guid for dev in d.get_device_list()}


def main():
    for r in range(ROUNDS):
        guids = listed()
        if sorted(guids) != ['cli', 'ra', 'rb', 'srv']:
            raise AssertionError(f'devices: {sorted(guids)}')
        for name in ('srv', 'ra', 'rb'):
            ctx = d.Context(name=name)
            use(ctx, name, guids[name])
            ctx.close()
        print(f'round {r}: srv, ra, rb opened, used and closed')
    guids = listed()
    srv = d.Context(name='srv')
    for r in range(3):
        cli = d.Context(name='cli')
        use(cli, 'cli', guids['cli'])
        cli.close()
    cli = d.Context(name='cli')
    for r in range(3):
        srv.close()
        srv = d.Context(name='srv')
        use(srv, 'srv', guids['srv'])
    print('server reopened under its client, client reopened with its server')
    again = d.Context(name='srv')
    use(again, 'srv', guids['srv'])
    again.close()
    cli.close()
    srv.close()
    print('two contexts of one device')
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Exception as exc:  # one line, then the status
        print(f'FAIL: {type(exc).__name__}: {exc}', file=sys.stderr)
        sys.exit(1)
