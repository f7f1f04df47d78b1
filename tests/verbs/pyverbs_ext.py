#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The verbs of issue 15 from pyverbs (python3-pyverbs, rdma-core 44) through
rocemu's libibverbs: two devices on an in-process ring pair are two hosts.

Run by meson with LD_LIBRARY_PATH at the build's verbs-provider; the
script writes the two devices' configuration itself (ROCEMU_CONFIG, read by
the library at the first device list). Arguments name the parts to run (all
by default). Each part checks what the man page promises, byte by byte;
any failure exits 1. Exits 77 when pyverbs cannot be imported.
"""
import os
import sys
import tempfile
import time

try:
    import pyverbs.enums as e
    from pyverbs.device import Context, get_device_list
    from pyverbs.pd import PD
    from pyverbs.cq import CQ
    from pyverbs.mr import MR, MW, MWBindInfo
    from pyverbs.wr import SGE
    from pyverbs.addr import AHAttr, GlobalRoute
    from pyverbs.qp import QPCap, QPInitAttrEx, QPAttr, QPEx, QP
    from pyverbs.pd import ParentDomain, ParentDomainInitAttr, ParentDomainContext
    from pyverbs.cq import CQEX, CqInitAttrEx, PollCqAttr
    from pyverbs.flow import Flow, FlowAttr
    from pyverbs.spec import EthSpec
    from pyverbs.pyverbs_error import PyverbsRDMAError
    import pyverbs.mem_alloc as mem
except ImportError as ex:  # pragma: no cover
    print("SKIP: pyverbs is not importable: %s" % ex)
    sys.exit(77)

GID_INDEX = 1
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def poll(cq, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
    raise RuntimeError("no completion within %.0f s" % timeout)


class Host:
    def __init__(self, name):
        self.ctx = Context(name=name)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        self.mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
                     e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
        self.gid = self.ctx.query_gid(1, GID_INDEX)


def rc_pair(a, b, ops):
    def make(h):
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        ia = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=h.cq, rcq=h.cq, cap=cap, pd=h.pd,
                          comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                          send_ops_flags=ops)
        return QPEx(h.ctx, ia)

    qa, qb = make(a), make(b)
    for q, peer_qp, peer in ((qa, qb, b), (qb, qa, a)):
        gr = GlobalRoute(dgid=peer.gid, sgid_index=GID_INDEX, hop_limit=64)
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        attr.qp_access_flags = (e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
                                e.IBV_ACCESS_REMOTE_ATOMIC)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        attr.dest_qp_num = peer_qp.qp_num
        attr.path_mtu = e.IBV_MTU_1024
        attr.max_dest_rd_atomic = 4
        attr.max_rd_atomic = 4
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        q.to_rts(attr)
    return qa, qb


def atomic_write(a, b):
    """ibv_wr_atomic_write(3): 8 bytes placed at the remote address, IBV_WC_ATOMIC_WRITE."""
    qa, qb = rc_pair(a, b, e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_SEND)
    b.mr.write(b"\xee" * 32, 32, 0)
    qa.wr_start()
    qa.wr_id = 5
    qa.wr_flags = e.IBV_SEND_SIGNALED
    qa.wr_atomic_write(b.mr.rkey, b.mr.buf + 8, b"\x01\x02\x03\x04\x05\x06\x07\x08")
    qa.wr_complete()
    wc = poll(a.cq)
    check(wc.status == e.IBV_WC_SUCCESS, "atomic write: status %d" % wc.status)
    check(wc.opcode == e.IBV_WC_ATOMIC_WRITE, "atomic write: opcode %d" % wc.opcode)
    got = b.mr.read(24, 0)
    check(got == b"\xee" * 8 + bytes(range(1, 9)) + b"\xee" * 8,
          "atomic write: remote bytes %s" % got.hex())
    print("ok atomic_write")


def parent_domain(a, b):
    """ibv_alloc_parent_domain(3) with Python allocators: the CQ's and the QP's
    rings come from them and go back to them; RDMA works through the QP."""
    log = {"alloc": [], "free": 0}

    def alloc(pd, context, size, alignment, resource_type):
        log["alloc"].append(resource_type)
        return mem.posix_memalign(size, alignment)

    def free(pd, context, ptr, resource_type):
        log["free"] += 1
        mem.free(ptr)

    pctx = ParentDomainContext(a.pd, alloc, free)
    pdom = ParentDomain(a.ctx, attr=ParentDomainInitAttr(pd=a.pd, pd_context=pctx))
    cqa = CqInitAttrEx(cqe=16, wc_flags=e.IBV_WC_STANDARD_FLAGS,
                       comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD | e.IBV_CQ_INIT_ATTR_MASK_FLAGS,
                       flags=e.IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, parent_domain=pdom)
    cq = CQEX(a.ctx, cqa)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    ia = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap, pd=pdom,
                      comp_mask=e.IBV_QP_INIT_ATTR_PD)
    qp = QP(a.ctx, ia)
    check(sorted(log["alloc"]) == [0x524f0001, 0x524f0002, 0x524f0003],
          "parent domain: allocations %s" % [hex(t) for t in log["alloc"]])
    qp.close()
    cq.close()
    check(log["free"] == 3, "parent domain: %d frees" % log["free"])
    pdom.close()
    print("ok parent_domain")


def mac_of(h):
    g = bytes.fromhex(h.ctx.query_gid(1, 0).gid.replace(":", ""))
    return ":".join("%02x" % x for x in (g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]))


def raw_packet(a, b):
    """IBV_QPT_RAW_PACKET with a steering rule (pyverbs Flow, EthSpec)."""
    def raw(h, cq):
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        ia = QPInitAttrEx(qp_type=e.IBV_QPT_RAW_PACKET, scq=cq, rcq=cq, cap=cap, pd=h.pd,
                          comp_mask=e.IBV_QP_INIT_ATTR_PD)
        qp = QP(h.ctx, ia)
        qp.to_init(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1))
        qp.to_rtr(QPAttr(qp_state=e.IBV_QPS_RTR))
        qp.to_rts(QPAttr(qp_state=e.IBV_QPS_RTS))
        return qp

    from pyverbs.wr import SGE, SendWR, RecvWR
    ra, rb = raw(a, a.cq), raw(b, b.cq)
    fa = FlowAttr(num_of_specs=1, port=1)
    fa.specs.append(EthSpec(ether_type=0x88B5, ether_type_mask=0xFFFF))
    flow = Flow(rb, fa)
    rb.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(b.mr.buf, 2048, b.mr.lkey)]))
    dst, src = mac_of(b), mac_of(a)
    frame = (bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) +
             b"\x88\xb5" + bytes(range(100)))
    a.mr.write(frame, len(frame), 0)
    ra.post_send(SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(a.mr.buf, len(frame), a.mr.lkey)]))
    wc = poll(a.cq)
    check(wc.status == e.IBV_WC_SUCCESS, "raw send: status %d" % wc.status)
    wc = poll(b.cq)
    check(wc.status == e.IBV_WC_SUCCESS and wc.byte_len == len(frame),
          "raw receive: status %d, %d bytes" % (wc.status, wc.byte_len))
    check(b.mr.read(len(frame), 0) == frame, "raw receive: the frame differs")
    flow.close()
    rb.close()
    ra.close()
    print("ok raw_packet")


def memory_window(a, b):
    """ibv_wr_bind_mw(3) on an extended QP (rdma-core's own MWTest, run by
    verbs-pyverbs-rdma-core-mw, covers ibv_post_send and ibv_bind_mw): a
    zero-based type 2 window over a region without remote rights, the peer's
    WRITE at window offset 64, ibv_wr_local_inv, then a remote access error."""
    ops = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE | e.IBV_QP_EX_WITH_BIND_MW |
           e.IBV_QP_EX_WITH_LOCAL_INV)
    qa, qb = rc_pair(a, b, ops)
    mr = MR(b.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
    mw = MW(b.pd, e.IBV_MW_TYPE_2)
    rkey = (mw.rkey & ~0xff) | ((mw.rkey + 1) & 0xff)  # ibv_inc_rkey
    qb.wr_start()
    qb.wr_id = 1
    qb.wr_flags = e.IBV_SEND_SIGNALED
    qb.wr_bind_mw(mw, rkey, MWBindInfo(mr, mr.buf + 1024, 512,
                                       e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_ZERO_BASED))
    qb.wr_complete()
    wc = poll(b.cq)
    check(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW,
          "mw: bind status %d opcode %d" % (wc.status, wc.opcode))

    def write(wr_id):
        qa.wr_start()
        qa.wr_id = wr_id
        qa.wr_flags = e.IBV_SEND_SIGNALED
        qa.wr_rdma_write(rkey, 64)
        qa.wr_set_sge(SGE(a.mr.buf, 16, a.mr.lkey))
        qa.wr_complete()
        return poll(a.cq)

    a.mr.write(bytes(range(100, 116)), 16, 0)
    wc = write(2)
    check(wc.status == e.IBV_WC_SUCCESS, "mw: WRITE through the window: status %d" % wc.status)
    check(mr.read(16, 1024 + 64) == bytes(range(100, 116)),
          "mw: window bytes %s" % mr.read(16, 1024 + 64).hex())
    qb.wr_start()
    qb.wr_id = 3
    qb.wr_flags = e.IBV_SEND_SIGNALED
    qb.wr_local_inv(rkey)
    qb.wr_complete()
    wc = poll(b.cq)
    check(wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_LOCAL_INV,
          "mw: LOCAL_INV status %d opcode %d" % (wc.status, wc.opcode))
    wc = write(4)
    check(wc.status == e.IBV_WC_REM_ACCESS_ERR,
          "mw: WRITE after LOCAL_INV: status %d, expected remote access error" % wc.status)
    for o in (qa, qb, mw, mr):
        o.close()
    print("ok memory_window")


PARTS = ["atomic_write", "parent_domain", "raw_packet", "memory_window"]


def main():
    with tempfile.NamedTemporaryFile("w", prefix="rocemu-pyverbs-", delete=False) as f:
        f.write("[rocemu0]\nport = ring:pyx:a\nip = 10.79.6.1/24\n"
                "[rocemu1]\nport = ring:pyx:b\nip = 10.79.6.2/24\n")
    os.environ["ROCEMU_CONFIG"] = f.name
    try:
        names = [d.name.decode() for d in get_device_list()]
    finally:
        os.unlink(f.name)
    if len(names) < 2:
        print("FAIL: expected two rocemu devices, got %s" % names)
        return 1
    a, b = Host(names[0]), Host(names[1])
    for part in sys.argv[1:] or PARTS:
        globals()[part](a, b)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
