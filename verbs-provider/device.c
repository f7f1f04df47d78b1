/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devices and contexts: the device list (from configuration), opening a
 * device (its engine is created at the first open and shared, refcounted,
 * by every context on it), and the query verbs.
 */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "provider.h"
#include "sysfs_files.h"

#undef ibv_get_device_list
#undef ibv_query_port

static struct rocemu_vdevice *g_devices[ROCEMU_MAX_DEVICES];
static unsigned g_n_devices;
static int g_config_errno;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* What the port says while an open waits (a memif client for its server):
 * one line on stderr, like the provider's errors. */
static void device_notice(void *arg, const char *line)
{
	const struct rocemu_vdevice *d = arg;

	fprintf(stderr, "rocemu: %s: %s\n", d->cfg.name, line);
}

static void load_devices(void)
{
	static struct rocemu_port_config cfgs[ROCEMU_MAX_DEVICES];
	char err[512];
	unsigned n = 0;

	int rc = rocemu_config_load(cfgs, ROCEMU_MAX_DEVICES, &n, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "rocemu: %s\n", err);
		g_config_errno = -rc;
		return;
	}
	if (n == 0) {
		g_config_errno = ENODEV;
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		struct rocemu_vdevice *d = calloc(1, sizeof(*d));
		if (!d) {
			g_config_errno = ENOMEM;
			return;
		}
		d->cfg = cfgs[i];
		d->cfg.notice = device_notice;
		d->cfg.notice_arg = d;
		d->index = i;
		pthread_mutex_init(&d->lock, NULL);
		d->ibdev.node_type = IBV_NODE_CA;
		d->ibdev.transport_type = IBV_TRANSPORT_IB;
		/* IBV_SYSFS_NAME_MAX (64) == ROCEMU_PORT_NAME_MAX: names always fit */
		const int nl = IBV_SYSFS_NAME_MAX - 1;
		snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%.*s", nl, cfgs[i].name);
		/* The uverbs device as the kernel names it: UCX requires
		 * /dev/infiniband/<dev_name> (rocemu run's view has it). */
		snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%u", i);
		snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
			 "/sys/class/infiniband_verbs/uverbs%u", i);
		snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
			 ROCEMU_SYSFS_CLASS "/%.*s", nl, cfgs[i].name);
		/* The GUID comes from the MAC: --mac, memif's and ring's generated
		 * one, the interface's (af_packet, af_xdp) are known without
		 * opening the port; only dpdk: ports need a look at the device. */
		uint8_t mac[6];
		if (rocemu_port_config_mac(&cfgs[i], mac) == 0) {
			d->guid = rocemu_guid_from_mac(mac);
			d->guid_known = true;
		}
		g_devices[g_n_devices++] = d;
	}
}

struct rocemu_vdevice **rocemu_devices(unsigned *n)
{
	pthread_once(&g_once, load_devices);
	*n = g_n_devices;
	return g_devices;
}

/* Modified EUI-64 from a MAC (RFC 4291 appendix A), as the GUID's bytes. */
uint64_t rocemu_guid_from_mac(const uint8_t mac[6])
{
	uint8_t b[8] = {mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
	uint64_t g;

	memcpy(&g, b, sizeof(g));
	return g;
}

static struct rocemu_vdevice *to_vdev(struct ibv_device *ibdev)
{
	unsigned n;
	struct rocemu_vdevice **devs = rocemu_devices(&n);

	for (unsigned i = 0; i < n; i++)
		if (&devs[i]->ibdev == ibdev)
			return devs[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Device list                                                                */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	unsigned n;
	struct rocemu_vdevice **devs = rocemu_devices(&n);
	struct ibv_device **list = calloc(n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < n; i++)
		list[i] = &devs[i]->ibdev;
	if (num_devices)
		*num_devices = (int)n;
	if (n == 0 && g_config_errno)
		errno = g_config_errno;
	return list;
}
ROCEMU_PUBLIC(ibv_get_device_list)

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}
ROCEMU_PUBLIC(ibv_free_device_list)

const char *ibv_get_device_name(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return NULL;
	}
	return device->name;
}
ROCEMU_PUBLIC(ibv_get_device_name)

int ibv_get_device_index(struct ibv_device *device)
{
	struct rocemu_vdevice *d = device ? to_vdev(device) : NULL;

	if (!d) {
		errno = EINVAL;
		return -1;
	}
	return (int)d->index;
}
ROCEMU_PUBLIC(ibv_get_device_index)

/* ------------------------------------------------------------------------ */
/* Engine sharing                                                             */

/* ROCEMU_TRACE=resp,comp (or all): the engine's protocol state changes, one
 * line each on stderr with the port's own trace lines. */
static void engine_trace(void *arg, const char *topic, const char *line)
{
	struct rocemu_vdevice *d = arg;

	if (rocemu_port_trace_on(topic))
		rocemu_port_trace_line(rocemu_engine_port(d->engine), topic, line);
}

static int engine_acquire(struct rocemu_vdevice *d)
{
	char err[512] = "";
	bool created = false;
	int rc = 0;

	pthread_mutex_lock(&d->lock);
	if (!d->engine) {
		created = true;
		rc = rocemu_engine_create(&d->cfg, &d->engine, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "rocemu: %s: %s\n", d->ibdev.name,
				err[0] ? err : strerror(-rc));
			d->engine = NULL;
		} else {
			uint8_t mac[6];
			rocemu_port_mac(rocemu_engine_port(d->engine), mac);
			d->guid = rocemu_guid_from_mac(mac);
			d->guid_known = true;
			rocemu_engine_set_event_handler(d->engine, rocemu_async_from_engine, d);
			if (rocemu_port_trace_on("resp") || rocemu_port_trace_on("comp"))
				rocemu_engine_set_trace(d->engine, engine_trace, d);
		}
	}
	if (rc == 0)
		d->refs++;
	pthread_mutex_unlock(&d->lock);
	if (rc == 0 && created)
		rocemu_sysfs_view_refresh(d);
	return rc;
}

/*
 * ROCEMU_STATS=1: before a device's engine goes away, print its non-zero port
 * and transport counters (frames, drops by reason, retransmissions, NAKs by
 * code, RNR, duplicates, timeouts) to stderr, so a user of an unmodified
 * program can see what the emulated NIC did. ROCEMU_STATS=all prints every
 * counter, zero or not: each drop reason there is.
 */
static void print_counter_set(const char *dev, const char *layer, const struct rocemu_counter *c,
			      unsigned n, bool all)
{
	for (unsigned i = 0; i < n; i++)
		if (c[i].value || all)
			fprintf(stderr, "rocemu: %s %s %s %" PRIu64 "\n", dev, layer, c[i].name,
				c[i].value);
}

static void engine_report_stats(const struct rocemu_vdevice *d, struct rocemu_engine *e)
{
	const char *env = getenv("ROCEMU_STATS");
	struct rocemu_counter c[256];
	bool all;
	unsigned n;

	if (!env || !*env || !strcmp(env, "0"))
		return;
	all = !strcmp(env, "all");
	rocemu_port_capture_sync(rocemu_engine_port(e)); /* capture_frames: what is in the file */
	n = all ? rocemu_port_counters_all(rocemu_engine_port(e), c, 256)
		: rocemu_port_counters(rocemu_engine_port(e), c, 256);
	print_counter_set(d->cfg.name, "port", c, n < 256 ? n : 256, all);
	n = rocemu_engine_counters(e, c, 256);
	print_counter_set(d->cfg.name, "transport", c, n < 256 ? n : 256, all);
}

/* A capture that could not write every frame says so when its port closes, always. */
static void report_capture_failures(void)
{
	char msg[ROCEMU_CAPTURE_MSG_MAX];

	while (rocemu_capture_take_failure(msg, sizeof(msg)))
		fprintf(stderr, "rocemu: %s\n", msg);
}

/* The last close destroys the engine: that stops progress and flushes the capture. */
static void engine_release(struct rocemu_vdevice *d)
{
	struct rocemu_engine *dead = NULL;

	pthread_mutex_lock(&d->lock);
	if (d->refs && --d->refs == 0) {
		dead = d->engine;
		d->engine = NULL;
	}
	pthread_mutex_unlock(&d->lock);
	if (dead) {
		rocemu_engine_drain(dead);
		engine_report_stats(d, dead);
		rocemu_engine_destroy(dead);
		report_capture_failures();
	}
}

/* Close remaining engines at exit so captures are complete even without ibv_close_device. */
__attribute__((destructor)) static void close_engines_at_exit(void)
{
	for (unsigned i = 0; i < g_n_devices; i++) {
		struct rocemu_vdevice *d = g_devices[i];
		pthread_mutex_lock(&d->lock);
		struct rocemu_engine *e = d->engine;
		d->engine = NULL;
		d->refs = 0;
		pthread_mutex_unlock(&d->lock);
		if (e) {
			rocemu_engine_drain(e);
			engine_report_stats(d, e);
			rocemu_engine_destroy(e);
		}
	}
	report_capture_failures();
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct rocemu_vdevice *d = device ? to_vdev(device) : NULL;

	if (!d) {
		errno = EINVAL;
		return 0;
	}
	/* Known from the config but for dpdk: ports: only the device knows. */
	if (!d->guid_known && engine_acquire(d) == 0)
		engine_release(d);
	return d->guid;
}
ROCEMU_PUBLIC(ibv_get_device_guid)

/* ------------------------------------------------------------------------ */
/* Context ops                                                                */

/* Slots of ibv_context_ops that only old (1.0) binaries could call. */
static void *op_compat_unsupported(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int op_compat_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return ibv_query_device(ctx, attr);
}

static int op_compat_query_port(struct ibv_context *ctx, uint8_t port,
				struct _compat_ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static void fill_ops(struct rocemu_vcontext *c)
{
	struct ibv_context_ops *o = &c->vctx.context.ops;
	void *(*u)(void) = op_compat_unsupported;

	o->_compat_query_device = op_compat_query_device;
	o->_compat_query_port = op_compat_query_port;
	o->_compat_alloc_pd = o->_compat_dealloc_pd = o->_compat_reg_mr = u;
	o->_compat_rereg_mr = o->_compat_dereg_mr = o->_compat_create_cq = u;
	o->_compat_cq_event = o->_compat_resize_cq = o->_compat_destroy_cq = u;
	o->_compat_create_srq = o->_compat_modify_srq = o->_compat_query_srq = u;
	o->_compat_destroy_srq = o->_compat_create_qp = o->_compat_query_qp = u;
	o->_compat_modify_qp = o->_compat_destroy_qp = o->_compat_create_ah = u;
	o->_compat_destroy_ah = o->_compat_attach_mcast = o->_compat_detach_mcast = u;
	o->_compat_async_event = u;
	o->alloc_mw = rocemu_op_alloc_mw;
	o->bind_mw = rocemu_op_bind_mw;
	o->dealloc_mw = rocemu_op_dealloc_mw;
	o->poll_cq = rocemu_op_poll_cq;
	o->req_notify_cq = rocemu_op_req_notify_cq;
	o->post_srq_recv = rocemu_op_post_srq_recv;
	o->post_send = rocemu_op_post_send;
	o->post_recv = rocemu_op_post_recv;

	/* verbs_context ops: NULL means "unsupported" to the inline wrappers. */
	struct verbs_context *v = &c->vctx;
	v->query_port = rocemu_op_query_port;
	v->advise_mr = rocemu_op_advise_mr;
	v->alloc_dm = rocemu_op_alloc_dm;
	v->free_dm = rocemu_op_free_dm;
	v->reg_dm_mr = rocemu_op_reg_dm_mr;
	v->create_cq_ex = rocemu_op_create_cq_ex;
	v->create_qp_ex = rocemu_op_create_qp_ex;
	v->create_srq_ex = rocemu_op_create_srq_ex;
	v->open_xrcd = rocemu_op_open_xrcd;
	v->close_xrcd = rocemu_op_close_xrcd;
	v->get_srq_num = rocemu_op_get_srq_num;
	v->open_qp = rocemu_op_open_qp;
	v->query_device_ex = rocemu_op_query_device_ex;
	v->query_rt_values = rocemu_op_query_rt_values;
	v->alloc_td = rocemu_op_alloc_td;
	v->dealloc_td = rocemu_op_dealloc_td;
	v->alloc_parent_domain = rocemu_op_alloc_parent_domain;
	v->ibv_create_flow = rocemu_op_create_flow;
	v->ibv_destroy_flow = rocemu_op_destroy_flow;
	v->modify_qp_rate_limit = rocemu_op_modify_qp_rate_limit;
}

/* A new context on d: on the command file f (a reference the context takes
 * over, also on failure) through cmd_fd, which the context closes; or on a
 * new file of its own when f is NULL. */
struct ibv_context *rocemu_context_new(struct rocemu_vdevice *d, struct rocemu_vfile *f, int cmd_fd)
{
	struct rocemu_vcontext *c = calloc(1, sizeof(*c));
	if (!c) {
		if (f)
			rocemu_vfile_put(f);
		errno = ENOMEM;
		return NULL;
	}
	bool own = !f;
	int rc = 0;
	int async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (async_fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (own) {
		rc = rocemu_vfile_open(d, &f, &cmd_fd);
		if (rc < 0)
			goto fail_async;
	}
	rc = engine_acquire(d);
	if (rc < 0)
		goto fail_file;
	c->cm_hooks = &rocemu_cm_hooks_impl;
	c->dev = d;
	c->engine = d->engine;
	c->port = rocemu_engine_port(d->engine);
	c->file = f;
	if (own)
		rocemu_vfile_attached(f, c->port);
	c->fork_gen = rocemu_fork_gen;
	pthread_mutex_init(&c->ev_lock, NULL);

	struct ibv_context *ctx = &c->vctx.context;
	ctx->device = &d->ibdev;
	ctx->cmd_fd = cmd_fd;
	ctx->async_fd = async_fd;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vctx.sz = sizeof(struct verbs_context);
	fill_ops(c);

	pthread_mutex_lock(&rocemu_ctx_list_lock);
	c->next = d->contexts;
	d->contexts = c;
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
	return ctx;

fail_file:
	rocemu_vfile_put(f);
	if (own)
		close(cmd_fd);
fail_async:
	close(async_fd);
	free(c);
	errno = -rc;
	return NULL;
fail:
	if (!own)
		rocemu_vfile_put(f);
	free(c);
	errno = -rc;
	return NULL;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct rocemu_vdevice *d = device ? to_vdev(device) : NULL;

	if (!d) {
		errno = ENODEV;
		return NULL;
	}
	return rocemu_context_new(d, NULL, -1);
}
ROCEMU_PUBLIC(ibv_open_device)

int ibv_close_device(struct ibv_context *ctx)
{
	if (!ctx)
		return EINVAL;
	struct rocemu_vcontext *c = to_vctx(ctx);
	struct rocemu_vdevice *d = c->dev;

	pthread_mutex_lock(&rocemu_ctx_list_lock);
	for (struct rocemu_vcontext **pp = &d->contexts; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&rocemu_ctx_list_lock);
	/* no event handler still sees c; a child after fork() frees its copy
	 * of a parent's context only: the engine is the parent's (fork.c) */
	if (!rocemu_dead(ctx)) {
		rocemu_engine_quiesce(c->engine);
		engine_release(d);
	}
	while (c->ev_head) {
		struct rocemu_async_event *e = c->ev_head;
		c->ev_head = e->next;
		free(e);
	}
	close(ctx->async_fd);
	rocemu_vfile_put(c->file);
	close(ctx->cmd_fd);
	pthread_mutex_destroy(&c->ev_lock);
	pthread_mutex_destroy(&ctx->mutex);
	free(c);
	return 0;
}
ROCEMU_PUBLIC(ibv_close_device)

/* ------------------------------------------------------------------------ */
/* Query device                                                               */

void rocemu_fill_device_attr(struct rocemu_vcontext *c, struct ibv_device_attr *a)
{
	struct rocemu_caps caps;

	rocemu_engine_caps(c->engine, &caps);
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", ROCEMU_VERSION);
	a->node_guid = c->dev->guid;
	a->sys_image_guid = c->dev->guid;
	a->max_mr_size = caps.max_mr_size;
	a->page_size_cap = ~(uint64_t)4095; /* any power of two from 4 KiB */
	a->vendor_id = 0xffffff;	    /* no IEEE OUI: a software device */
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = (int)caps.max_qp;
	a->max_qp_wr = (int)caps.max_qp_wr;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_MANAGED_FLOW_STEERING | IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = (int)caps.max_sge;
	a->max_sge_rd = (int)caps.max_sge_rd;
	a->max_cq = (int)caps.max_cq;
	a->max_cqe = (int)caps.max_cqe;
	a->max_mr = (int)caps.max_mr;
	a->max_mw = (int)caps.max_mw;
	a->max_pd = (int)caps.max_pd;
	a->max_qp_rd_atom = (int)caps.max_qp_rd_atom;
	a->max_res_rd_atom = (int)caps.max_res_rd_atom;
	a->max_qp_init_rd_atom = (int)caps.max_qp_init_rd_atom;
	a->atomic_cap = caps.atomic_hca ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
	a->max_ah = (int)caps.max_ah;
	a->max_srq = (int)caps.max_srq;
	a->max_srq_wr = (int)caps.max_srq_wr;
	a->max_srq_sge = (int)caps.max_srq_sge;
	a->max_pkeys = (uint16_t)(caps.max_pkeys ? caps.max_pkeys : 1);
	a->max_mcast_grp = (int)caps.max_mcast_grp;
	a->max_mcast_qp_attach = (int)caps.max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = (int)(caps.max_mcast_grp * caps.max_mcast_qp_attach);
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx);
	if (!ctx || !attr)
		return EINVAL;
	rocemu_fill_device_attr(to_vctx(ctx), attr);
	return 0;
}
ROCEMU_PUBLIC(ibv_query_device)

int rocemu_op_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex a;
	struct rocemu_caps caps;

	if (!ctx || !attr || (in && in->comp_mask) || attr_size < sizeof(a.orig_attr))
		return EINVAL;
	struct rocemu_vcontext *c = to_vctx(ctx);
	rocemu_engine_caps(c->engine, &caps);
	memset(&a, 0, sizeof(a));
	rocemu_fill_device_attr(c, &a.orig_attr);
	if (caps.odp) {
		a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
		a.odp_caps.per_transport_caps.rc_odp_caps =
		    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
		a.odp_caps.per_transport_caps.uc_odp_caps =
		    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
		a.odp_caps.per_transport_caps.ud_odp_caps =
		    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
		/* XRC: RC's operations, receives through XRC SRQs */
		a.xrc_odp_caps = a.odp_caps.per_transport_caps.rc_odp_caps & ~IBV_ODP_SUPPORT_RECV;
	}
	a.max_dm_size = caps.max_dm_size;
	if (caps.timestamp_hz) {
		a.completion_timestamp_mask = UINT64_MAX;
		a.hca_core_clock = caps.timestamp_hz / 1000; /* kHz */
	}
	/* Send rate limits (ibv_modify_qp_rate_limit, IBV_QP_RATE_LIMIT): a token
	 * bucket per QP in the engine (emulator/transport/rate.c). */
	a.packet_pacing_caps.qp_rate_limit_min = 1;
	a.packet_pacing_caps.qp_rate_limit_max = ROCEMU_RATE_MAX_KBPS;
	a.packet_pacing_caps.supported_qpts = 1u << IBV_QPT_RC | 1u << IBV_QPT_UC |
					      1u << IBV_QPT_UD | 1u << IBV_QPT_RAW_PACKET |
					      1u << IBV_QPT_XRC_SEND;
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags;
	a.phys_port_cnt_ex = 1;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	if (attr_size > sizeof(a))
		memset((char *)attr + sizeof(a), 0, attr_size - sizeof(a));
	return 0;
}

int rocemu_op_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values)
{
	if (!ctx || !values)
		return EINVAL;
	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		uint64_t ns = rocemu_now_ns();
		values->raw_clock.tv_sec = (time_t)(ns / 1000000000u);
		values->raw_clock.tv_nsec = (long)(ns % 1000000000u);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Query port                                                                 */

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
	if (bytes >= 4096)
		return IBV_MTU_4096;
	if (bytes >= 2048)
		return IBV_MTU_2048;
	if (bytes >= 1024)
		return IBV_MTU_1024;
	if (bytes >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

/*
 * Port state as programs see it. A memif link is "up" only while the peer
 * process is attached, but the peer is another program that starts later
 * (perftest's server checks the port before it accepts its client, which
 * then brings the memif peer). For memif the socket is the cable: the port
 * counts as active once started; frames sent before the peer attaches are
 * lost and recovered like any loss (ARP retries, RC retransmission). Other
 * ports (af_packet, af_xdp, PMDs) report the ethdev's real link.
 */
bool rocemu_vdevice_port_active(const struct rocemu_vdevice *d, struct rocemu_port *port)
{
	return rocemu_port_link_up(port) || !strncmp(d->cfg.spec, "memif:", 6);
}

static void fill_port_attr(struct rocemu_vcontext *c, struct ibv_port_attr *a)
{
	struct rocemu_caps caps;
	bool up = rocemu_vdevice_port_active(c->dev, c->port);

	rocemu_engine_caps(c->engine, &caps);
	memset(a, 0, sizeof(*a));
	a->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = mtu_enum(rocemu_port_active_mtu(c->port));
	a->gid_tbl_len = ROCEMU_PORT_MAX_GIDS;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a->max_msg_sz = caps.max_msg_sz;
	a->pkey_tbl_len = (uint16_t)(caps.max_pkeys ? caps.max_pkeys : 1);
	a->max_vl_num = 1;
	rocemu_link_width_speed(rocemu_port_link_speed(c->port), &a->active_width,
				&a->active_speed);
	a->phys_state = up ? 5 : 3; /* LinkUp : Disabled */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	/* LID-only extension: low 16 bits of the first IPv4 address (0: none).
	 * No subnet manager: sm_lid 0, lmc 0. */
	a->lid = rocemu_lid_of_port(c->port);
}

int rocemu_op_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			 size_t attr_len)
{
	struct ibv_port_attr a;

	if (!ctx || !attr || port != 1)
		return EINVAL;
	fill_port_attr(to_vctx(ctx), &a);
	memcpy(attr, &a, attr_len < sizeof(a) ? attr_len : sizeof(a));
	return 0;
}

/* The exported symbol is the old-layout entry point (struct before port_cap_flags2). */
int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx);
	return rocemu_op_query_port(ctx, port, (struct ibv_port_attr *)attr,
				    offsetof(struct ibv_port_attr, port_cap_flags2));
}
ROCEMU_PUBLIC(ibv_query_port)

/* ------------------------------------------------------------------------ */
/* GIDs and P_Keys                                                            */

/* 0 and gid filled; -ENODATA for an empty slot; -EINVAL out of the table. */
static int gid_at(struct rocemu_vcontext *c, uint32_t port, uint32_t index, uint8_t gid[16])
{
	if (port != 1 || index >= ROCEMU_PORT_MAX_GIDS)
		return -EINVAL;
	if (index >= rocemu_port_gid_count(c->port) || rocemu_port_gid(c->port, index, gid) < 0)
		return -ENODATA;
	return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx), -1;
	if (!ctx || !gid || index < 0) {
		errno = EINVAL;
		return -1;
	}
	int rc = gid_at(to_vctx(ctx), port, (uint32_t)index, gid->raw);
	if (rc == -ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}
ROCEMU_PUBLIC(ibv_query_gid)

/* The index of the GIDs' netdev (rocemu_gid_netdev), as rdma-core finds it
 * from gid_attrs/ndevs: 0 when the kernel has no such netdev (a memif port,
 * a VLAN rocemu tags itself with no kernel VLAN netdev of that name). */
static uint32_t gid_ifindex(struct rocemu_vcontext *c)
{
	char netdev[ROCEMU_PORT_NAME_MAX];

	rocemu_gid_netdev(rocemu_port_get_config(c->port), netdev, sizeof(netdev));
	return if_nametoindex(netdev);
}

static void fill_gid_entry(struct rocemu_vcontext *c, uint32_t index, const uint8_t gid[16],
			   struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->gid.raw, gid, 16);
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = gid_ifindex(c);
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	if (rocemu_dead(ctx))
		return rocemu_inherited_fail(ctx);
	uint8_t gid[16];

	if (!ctx || !entry || flags || entry_size < sizeof(*entry))
		return EINVAL;
	int rc = gid_at(to_vctx(ctx), port, index, gid);
	if (rc < 0)
		return -rc;
	fill_gid_entry(to_vctx(ctx), index, gid, entry);
	return 0;
}
ROCEMU_PUBLIC(_ibv_query_gid_ex)

ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size)
{
	if (rocemu_dead(ctx))
		return -rocemu_inherited_fail(ctx);
	uint8_t gid[16];
	size_t n = 0;

	if (!ctx || (!entries && max_entries) || flags || entry_size < sizeof(*entries))
		return -EINVAL;
	struct rocemu_vcontext *c = to_vctx(ctx);
	for (uint32_t i = 0; i < ROCEMU_PORT_MAX_GIDS; i++) {
		if (gid_at(c, 1, i, gid) < 0)
			continue;
		if (n == max_entries)
			return -EINVAL; /* man page: table larger than max_entries */
		fill_gid_entry(c, i, gid,
			       (struct ibv_gid_entry *)((char *)entries + n * entry_size));
		n++;
	}
	return (ssize_t)n;
}
ROCEMU_PUBLIC(_ibv_query_gid_table)

int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index, int *type)
{
	if (!ctx || !type || port != 1 || index >= ROCEMU_PORT_MAX_GIDS) {
		errno = EINVAL;
		return -1;
	}
	*type = ROCEMU_GID_TYPE_SYSFS_ROCE_V2; /* every rocemu GID is RoCE v2 */
	return 0;
}
ROCEMU_PUBLIC(ibv_query_gid_type)

/* One P_Key: the default full-membership 0xffff at index 0. */
int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	if (!ctx || !pkey || port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}
ROCEMU_PUBLIC(ibv_query_pkey)

int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (!ctx || port != 1) {
		errno = EINVAL;
		return -1;
	}
	if ((be16toh(pkey) & 0x7fff) != 0x7fff) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
ROCEMU_PUBLIC(ibv_get_pkey_index)
