/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs' argument checks, through rocemu's own libibverbs (this program
 * links it, not the system's): bad arguments get the errno the man pages
 * promise and never crash; unsupported verbs answer EOPNOTSUPP; the config
 * error path prints one message and yields an empty device list.
 *
 * Devices: two ports on an in-process DPDK ring pair (no other process).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

/* Exports declared in rdma-core's uninstalled driver.h. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
const char *ibv_get_sysfs_path(void);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       int *type);

static struct ibv_device **devs;
static int n_devs;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static char buf[8192];

static int setup(void **state)
{
	(void)state;
	unsetenv("ROCEMU_CONFIG");
	setenv("ROCEMU_DEVICE",
	       "name=rocemu0\nport=ring:va:a\nip=10.77.0.1/24\nmac=02:00:00:77:00:01\n", 1);
	devs = ibv_get_device_list(&n_devs);
	if (!devs || n_devs != 1)
		return -1;
	ctx = ibv_open_device(devs[0]);
	if (!ctx) {
		fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
		return -1;
	}
	pd = ibv_alloc_pd(ctx);
	return pd ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return 0;
}

#define assert_null_errno(expr, e)                                                                 \
	do {                                                                                       \
		errno = 0;                                                                         \
		void *p_ = (void *)(expr);                                                         \
		if (p_ || errno != (e))                                                            \
			fail_msg("%s: got %p errno %d (%s), expected NULL errno %d", #expr, p_,    \
				 errno, strerror(errno), (e));                                     \
	} while (0)

static void loaded_our_library(void **state)
{
	(void)state;
	Dl_info info;
	assert_true(dladdr((void *)ibv_open_device, &info));
	if (!strstr(info.dli_fname, "verbs-provider") && !strstr(info.dli_fname, "rocemu"))
		fail_msg("ibv_open_device comes from %s, not rocemu's libibverbs", info.dli_fname);
}

static void device_list_and_names(void **state)
{
	(void)state;
	assert_string_equal(ibv_get_device_name(devs[0]), "rocemu0");
	assert_null(devs[1]);
	assert_int_equal(ibv_get_device_index(devs[0]), 0);
	/* EUI-64 of 02:00:00:77:00:01 */
	uint64_t g = be64toh(ibv_get_device_guid(devs[0]));
	assert_int_equal(g, 0x000000fffe770001ULL);
	assert_null_errno(ibv_get_device_name(NULL), EINVAL);
	assert_null_errno(ibv_open_device(NULL), ENODEV);
}

static void query_device_and_port(void **state)
{
	(void)state;
	struct ibv_device_attr a;
	struct ibv_port_attr p;
	struct ibv_device_attr_ex ax;

	assert_int_equal(ibv_query_device(ctx, &a), 0);
	assert_string_equal(a.fw_ver, ROCEMU_VERSION);
	assert_int_equal(a.phys_port_cnt, 1);
	assert_int_equal(a.node_guid, ibv_get_device_guid(devs[0]));
	assert_true(a.max_qp > 0 && a.max_cqe > 0 && a.max_mr > 0);
	assert_int_equal(ibv_query_device(NULL, &a), EINVAL);

	assert_int_equal(ibv_query_device_ex(ctx, NULL, &ax), 0);
	assert_memory_equal(&ax.orig_attr, &a, sizeof(a));
	assert_true(ax.odp_caps.general_caps & IBV_ODP_SUPPORT);
	assert_true(ax.completion_timestamp_mask != 0 && ax.hca_core_clock != 0);
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	assert_int_equal(ibv_query_device_ex(ctx, &in, &ax), EINVAL);

	assert_int_equal(ibv_query_port(ctx, 1, &p), 0);
	assert_int_equal(p.link_layer, IBV_LINK_LAYER_ETHERNET);
	assert_true(p.gid_tbl_len >= 2);
	assert_true(p.active_mtu >= IBV_MTU_256 && p.active_mtu <= IBV_MTU_4096);
	assert_int_equal(ibv_query_port(ctx, 2, &p), EINVAL);
	assert_int_equal(ibv_query_port(ctx, 0, &p), EINVAL);
}

static void gids_and_pkeys(void **state)
{
	(void)state;
	union ibv_gid gid;
	struct ibv_port_attr p;
	struct ibv_gid_entry e, table[32];
	const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
	int type = -1;
	__be16 pkey;

	assert_int_equal(ibv_query_port(ctx, 1, &p), 0);
	assert_int_equal(ibv_query_gid(ctx, 1, 1, &gid), 0);
	assert_memory_equal(gid.raw, v4, 16);
	errno = 0;
	assert_int_equal(ibv_query_gid(ctx, 1, -1, &gid), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_query_gid(ctx, 1, p.gid_tbl_len, &gid), -1);
	assert_int_equal(ibv_query_gid(ctx, 2, 0, &gid), -1);
	/* an empty slot inside the table reads as zeros, as with the kernel */
	assert_int_equal(ibv_query_gid(ctx, 1, p.gid_tbl_len - 1, &gid), 0);

	assert_int_equal(ibv_query_gid_ex(ctx, 1, 1, &e, 0), 0);
	assert_int_equal(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	assert_memory_equal(e.gid.raw, v4, 16);
	assert_int_equal(ibv_query_gid_ex(ctx, 1, 1, &e, 1), EINVAL);
	assert_int_equal(ibv_query_gid_ex(ctx, 1, p.gid_tbl_len - 1, &e, 0), ENODATA);
	ssize_t n = ibv_query_gid_table(ctx, table, 32, 0);
	assert_true(n >= 2);
	for (ssize_t i = 0; i < n; i++)
		assert_int_equal(table[i].gid_type, IBV_GID_TYPE_ROCE_V2);
	assert_int_equal(ibv_query_gid_table(ctx, table, 1, 0), -EINVAL);

	assert_int_equal(ibv_query_gid_type(ctx, 1, 1, &type), 0);
	assert_int_equal(type, 1); /* IBV_GID_TYPE_SYSFS_ROCE_V2 */

	assert_int_equal(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	assert_int_equal(be16toh(pkey), 0xffff);
	assert_int_equal(ibv_query_pkey(ctx, 1, 1, &pkey), -1);
	assert_int_equal(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)), 0);
	assert_int_equal(ibv_get_pkey_index(ctx, 1, htobe16(0x1234)), -1);
}

static void sysfs_answers(void **state)
{
	(void)state;
	char s[64];
	assert_int_equal(
	    ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gid_attrs/types/1", s, sizeof(s)),
	    (int)strlen("RoCE v2"));
	assert_string_equal(s, "RoCE v2");
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gid_attrs/ndevs/1", s,
					sizeof(s)) > 0);
	assert_int_equal(
	    ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gid_attrs/types/7", s, sizeof(s)),
	    -1);
	assert_int_equal(ibv_read_sysfs_file(devs[0]->ibdev_path, "no_such_file", s, sizeof(s)),
			 -1);
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "board_id", s, sizeof(s)) > 0);
	assert_int_equal(ibv_read_sysfs_file(devs[0]->ibdev_path, "board_id", s, 3), -1);
	/* The GUID and GIDs from --mac and --ip, whether the device is open or not. */
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "node_guid", s, sizeof(s)) > 0);
	assert_string_equal(s, "0000:00ff:fe77:0001");
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gids/0", s, sizeof(s)) > 0);
	assert_string_equal(s, "fe80:0000:0000:0000:0000:00ff:fe77:0001");
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gids/1", s, sizeof(s)) > 0);
	assert_string_equal(s, "0000:0000:0000:0000:0000:ffff:0a4d:0001");
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/gids/8", s, sizeof(s)) > 0);
	assert_string_equal(s, "0000:0000:0000:0000:0000:0000:0000:0000");
	assert_true(ibv_read_sysfs_file(devs[0]->ibdev_path, "ports/1/rate", s, sizeof(s)) > 0);
	assert_non_null(strstr(s, " Gb/sec ("));
	/* The uverbs node as the kernel names it (UCX opens /dev/infiniband/<dev_name>). */
	assert_string_equal(devs[0]->dev_name, "uverbs0");
	assert_string_equal(devs[0]->dev_path, "/sys/class/infiniband_verbs/uverbs0");
	assert_int_equal(ibv_read_sysfs_file(NULL, "x", s, sizeof(s)), -1);
	assert_string_equal(ibv_get_sysfs_path(),
			    getenv("SYSFS_PATH") ? getenv("SYSFS_PATH") : "/sys");
}

static void pd_and_mr(void **state)
{
	(void)state;
	assert_null_errno(ibv_alloc_pd(NULL), EINVAL);
	assert_int_equal(ibv_dealloc_pd(NULL), EINVAL);
	/* ibv_reg_mr(3): remote write without local write is EINVAL */
	assert_null_errno(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), EINVAL);
	assert_null_errno(ibv_reg_mr(NULL, buf, sizeof(buf), 0), EINVAL);

	struct ibv_mr *mr =
	    ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	assert_non_null(mr);
	assert_ptr_equal(mr->addr, buf);
	assert_int_equal(mr->length, sizeof(buf));
	assert_ptr_equal(mr->pd, pd);
	/* a PD with an MR cannot go */
	assert_int_equal(ibv_dealloc_pd(pd), EBUSY);
	/* no flag: the device's refusal (verbs-mem has every rereg rule) */
	assert_int_equal(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD);
	assert_int_equal(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE), 0);
	assert_int_equal(ibv_dereg_mr(mr), 0);
	assert_int_equal(ibv_dereg_mr(NULL), EINVAL);

	struct ibv_mr *mr2 = ibv_reg_mr_iova2(pd, buf, 4096, 0x10000, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(mr2);
	struct ibv_sge sge = {.addr = 0x10000, .length = 64, .lkey = mr2->lkey};
	assert_int_equal(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 0), EINVAL);
	assert_int_equal(ibv_dereg_mr(mr2), 0);
	assert_null_errno(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0), EOPNOTSUPP);
}

static void cq_and_channel(void **state)
{
	(void)state;
	struct ibv_device_attr a;
	assert_int_equal(ibv_query_device(ctx, &a), 0);
	assert_null_errno(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	assert_null_errno(ibv_create_cq(ctx, a.max_cqe + 1, NULL, NULL, 0), EINVAL);
	assert_null_errno(ibv_create_cq(ctx, 16, NULL, NULL, ctx->num_comp_vectors), EINVAL);
	assert_null_errno(ibv_create_cq(NULL, 16, NULL, NULL, 0), EINVAL);

	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	assert_non_null(ch);
	assert_true(ch->fd >= 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, (void *)0x1234, ch, 0);
	assert_non_null(cq);
	assert_true(cq->cqe >= 16);
	assert_int_equal(ibv_destroy_comp_channel(ch), EBUSY);
	/* nothing happened: a non-blocking channel has no event */
	assert_int_equal(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	errno = 0;
	assert_int_equal(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(ibv_req_notify_cq(cq, 0), 0);
	assert_int_equal(ibv_req_notify_cq(cq, 1), 0);
	struct ibv_wc wc[4];
	assert_int_equal(ibv_poll_cq(cq, 4, wc), 0);
	assert_true(ibv_poll_cq(cq, -1, wc) < 0);
	assert_int_equal(ibv_resize_cq(cq, 0), EINVAL);
	assert_int_equal(ibv_resize_cq(cq, 64), 0);
	assert_true(cq->cqe >= 64);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_comp_channel(ch), 0);
	assert_int_equal(ibv_destroy_cq(NULL), EINVAL);

	/* TM_INFO needs a tag-matching SRQ, which this device has not (max_num_tags 0). */
	struct ibv_cq_init_attr_ex cx = {.cqe = 8, .wc_flags = IBV_WC_EX_WITH_TM_INFO};
	assert_null_errno(ibv_create_cq_ex(ctx, &cx), EOPNOTSUPP);
	cx.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cx);
	assert_non_null(cqx);
	struct ibv_poll_cq_attr pa = {0};
	assert_int_equal(ibv_start_poll(cqx, &pa), ENOENT);
	pa.comp_mask = 1;
	assert_int_equal(ibv_start_poll(cqx, &pa), EINVAL);
	assert_int_equal(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
}

static void qp_checks(void **state)
{
	(void)state;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	assert_non_null(cq);
	struct ibv_qp_init_attr ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp_init_attr bad = ia;
	bad.send_cq = NULL;
	assert_null_errno(ibv_create_qp(pd, &bad), EINVAL);
	bad = ia;
	bad.qp_type = IBV_QPT_XRC_RECV; /* a target QP needs a domain: ibv_create_qp_ex */
	assert_null_errno(ibv_create_qp(pd, &bad), EINVAL);
	bad = ia;
	bad.qp_type = IBV_QPT_DRIVER;
	assert_null_errno(ibv_create_qp(pd, &bad), EOPNOTSUPP);
	bad = ia;
	bad.cap.max_send_wr = 1u << 30;
	assert_null_errno(ibv_create_qp(pd, &bad), EINVAL);
	assert_null_errno(ibv_create_qp(NULL, &ia), EINVAL);

	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	assert_non_null(qp);
	assert_int_equal(qp->state, IBV_QPS_RESET);
	assert_true(ia.cap.max_send_wr >= 4);
	assert_null_errno(ibv_qp_to_qp_ex(qp), EOPNOTSUPP);

	/* posting to a RESET QP fails and names the WR */
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = 0};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
	struct ibv_send_wr *bad_wr = NULL;
	assert_int_equal(ibv_post_send(qp, &wr, &bad_wr), EINVAL);
	assert_ptr_equal(bad_wr, &wr);
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &sge, .num_sge = -1};
	struct ibv_recv_wr *bad_rwr = NULL;
	assert_int_equal(ibv_post_recv(qp, &rwr, &bad_rwr), EINVAL);
	assert_ptr_equal(bad_rwr, &rwr);

	/* RESET -> RTS is not a legal transition */
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTS};
	assert_int_equal(ibv_modify_qp(qp, &at, IBV_QP_STATE), EINVAL);
	assert_int_equal(qp->state, IBV_QPS_RESET);
	at.qp_state = IBV_QPS_INIT;
	at.port_num = 1;
	at.pkey_index = 0;
	at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	assert_int_equal(
	    ibv_modify_qp(qp, &at,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	assert_int_equal(qp->state, IBV_QPS_INIT);
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	assert_int_equal(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi), 0);
	assert_int_equal(q.qp_state, IBV_QPS_INIT);
	assert_ptr_equal(qi.send_cq, cq);

	/* a CQ in use cannot go */
	assert_int_equal(ibv_destroy_cq(cq), EBUSY);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(ibv_destroy_qp(NULL), EINVAL);
}

static void qp_ex_builder(void **state)
{
	(void)state;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	assert_non_null(cq);
	struct ibv_qp_init_attr_ex ia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .pd = pd,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	    .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO,
	};
	assert_null_errno(ibv_create_qp_ex(ctx, &ia), EOPNOTSUPP);
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
	assert_non_null(qp);
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	assert_non_null(qx);
	/* a setter before any WR, a bind_mw without a window, an unsupported
	 * builder: the batch fails as a whole */
	ibv_wr_start(qx);
	ibv_wr_set_sge(qx, 0, (uintptr_t)buf, 8);
	assert_int_equal(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_bind_mw(qx, NULL, 0, NULL);
	assert_int_equal(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send_tso(qx, buf, 8, 64);
	assert_int_equal(ibv_wr_complete(qx), EOPNOTSUPP);
	/* a well-formed batch on a RESET QP is refused by the engine */
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, 0, (uintptr_t)buf, 8);
	assert_int_equal(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_abort(qx);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
}

static void srq_and_ah(void **state)
{
	(void)state;
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 8, .max_sge = 1}};
	assert_null_errno(ibv_create_srq(NULL, &si), EINVAL);
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	assert_non_null(srq);
	assert_true(si.attr.max_wr >= 8);
	struct ibv_srq_attr sa;
	assert_int_equal(ibv_query_srq(srq, &sa), 0);
	assert_true(sa.max_wr >= 8);
	struct ibv_recv_wr rwr = {.num_sge = -1}, *bad = NULL;
	assert_int_equal(ibv_post_srq_recv(srq, &rwr, &bad), EINVAL);
	assert_ptr_equal(bad, &rwr);
	assert_int_equal(ibv_destroy_srq(srq), 0);

	struct ibv_srq_init_attr_ex sx = {.attr = {.max_wr = 8, .max_sge = 1},
					  .comp_mask =
					      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = pd};
	/* an XRC SRQ without its domain and CQ (ibv_create_srq_ex(3)) */
	assert_null_errno(ibv_create_srq_ex(ctx, &sx), EINVAL);
	sx.srq_type = IBV_SRQT_TM;
	assert_null_errno(ibv_create_srq_ex(ctx, &sx), EOPNOTSUPP);

	struct ibv_ah_attr aa = {
	    .is_global = 1, .port_num = 1, .grh = {.sgid_index = 1, .hop_limit = 64}};
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
	aa.grh.dgid.raw[12] = 10;
	aa.grh.dgid.raw[13] = 77;
	aa.grh.dgid.raw[15] = 2;
	assert_null_errno(ibv_create_ah(NULL, &aa), EINVAL);
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);
	assert_non_null(ah);
	assert_int_equal(ibv_destroy_ah(ah), 0);

	struct ibv_wc wc = {.wc_flags = 0};
	struct ibv_grh grh;
	struct ibv_ah_attr out;
	memset(&grh, 0, sizeof(grh));
	assert_int_equal(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &out), EINVAL); /* no GRH */
	assert_null_errno(ibv_create_ah_from_wc(pd, &wc, &grh, 1), EINVAL);
}

static void unsupported_verbs(void **state)
{
	(void)state;
	/* memory windows of a type that does not exist (types 1 and 2: verbs-mw) */
	assert_null_errno(ibv_alloc_mw(pd, (enum ibv_mw_type)3), EINVAL);
	/* XRC domains (XRC itself: transport_xrc, verbs-check-memif-xrc): fd and
	 * oflags are required; a file descriptor that is none: EBADF; a file no
	 * domain has yet, without O_CREAT: EAGAIN */
	struct ibv_xrcd_init_attr xa = {0};
	assert_null_errno(ibv_open_xrcd(ctx, &xa), EINVAL);
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	xa.fd = 1000000;
	assert_null_errno(ibv_open_xrcd(ctx, &xa), EBADF);
	xa.fd = ctx->async_fd;
	assert_null_errno(ibv_open_xrcd(ctx, &xa), EAGAIN);
	struct ibv_qp_open_attr oa = {.comp_mask = IBV_QP_OPEN_ATTR_NUM, .qp_type = IBV_QPT_RC};
	assert_null_errno(ibv_open_qp(ctx, &oa), EINVAL);
	/* ibv_alloc_td(3) defines no comp_mask bit (thread domains work: verbs-ext). */
	struct ibv_td_init_attr ta = {.comp_mask = 1};
	assert_null_errno(ibv_alloc_td(ctx, &ta), EINVAL);
	union ibv_gid g = {0};
	assert_int_equal(ibv_attach_mcast(NULL, &g, 0), EINVAL); /* multicast: verbs-mcast */
	assert_int_equal(ibv_detach_mcast(NULL, &g, 0), EINVAL);
	struct ibv_async_event ev;
	assert_int_equal(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK),
			 0);
	errno = 0;
	assert_int_equal(ibv_get_async_event(ctx, &ev), -1);
	assert_int_equal(errno, EAGAIN);
}

static void helpers(void **state)
{
	(void)state;
	assert_string_equal(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
	assert_string_equal(ibv_wc_status_str((enum ibv_wc_status)999), "unknown");
	assert_string_equal(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	assert_string_equal(ibv_event_type_str((enum ibv_event_type) - 1), "unknown");
	assert_string_equal(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
	assert_int_equal(ibv_rate_to_mbps(IBV_RATE_100_GBPS), 103125);
	assert_int_equal(mbps_to_ibv_rate(25781), IBV_RATE_25_GBPS);
	assert_int_equal(ibv_rate_to_mult(IBV_RATE_10_GBPS), 4);
	assert_int_equal(mult_to_ibv_rate(3), IBV_RATE_MAX);
	assert_int_equal(ibv_fork_init(), 0);
	assert_int_equal(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

/* A broken config: one message naming file and line, an empty list with errno. */
static void config_error_child(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		char *args[] = {"verbs_args_test", "--config-error-child", NULL};
		execv("/proc/self/exe", args);
		_exit(12);
	}
	close(fds[1]);
	char out[1024] = "";
	ssize_t got = 0, r;
	while ((r = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += r;
	out[got] = '\0';
	close(fds[0]);
	int st;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* exactly one line, naming the file, line 3, and the option */
	if (!strstr(out, "/tmp/rocemu-badcfg-") || !strstr(out, ":3:") || !strstr(out, "bogus"))
		fail_msg("unexpected message: '%s'", out);
	char *nl = strchr(out, '\n');
	assert_non_null(nl);
	assert_int_equal(nl[1], '\0');
}

/* In a fresh process: nothing loaded the configuration yet. */
static int config_error_child_main(void)
{
	char path[] = "/tmp/rocemu-badcfg-XXXXXX";
	int fd = mkstemp(path);
	const char text[] = "[rocemu0]\nport = memif:server:/tmp/x.sock\nbogus = 1\n";
	if (fd < 0 || write(fd, text, sizeof(text) - 1) != (ssize_t)sizeof(text) - 1)
		return 10;
	close(fd);
	setenv("ROCEMU_CONFIG", path, 1);
	int n = -1;
	errno = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	int e1 = errno;
	struct ibv_device **l2 = ibv_get_device_list(&n); /* must not print again */
	unlink(path);
	int rc = !l || l[0] || n != 0 || e1 == 0 || !l2 ? 11 : 0;
	ibv_free_device_list(l);
	ibv_free_device_list(l2);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--config-error-child"))
		return config_error_child_main();

	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(config_error_child),
	    cmocka_unit_test(loaded_our_library),
	    cmocka_unit_test(device_list_and_names),
	    cmocka_unit_test(query_device_and_port),
	    cmocka_unit_test(gids_and_pkeys),
	    cmocka_unit_test(sysfs_answers),
	    cmocka_unit_test(pd_and_mr),
	    cmocka_unit_test(cq_and_channel),
	    cmocka_unit_test(qp_checks),
	    cmocka_unit_test(qp_ex_builder),
	    cmocka_unit_test(srq_and_ah),
	    cmocka_unit_test(unsupported_verbs),
	    cmocka_unit_test(helpers),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
