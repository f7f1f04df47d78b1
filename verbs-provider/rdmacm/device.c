/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devices and the GSI agent. At the first use the library opens every rocemu
 * device (the engine runs in this process), creates its GSI QP (QP1:
 * IBV_QP_CREATE_SOURCE_QPN with source_qpn 1) with a CQ on a completion
 * channel, and starts one CM thread. The thread sleeps in poll() on the
 * channels' fds (armed CQs, so it is woken by each received MAD) with a
 * timeout that is the next retransmission deadline; it never spins.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cm_hooks.h"
#include "cma.h"

pthread_mutex_t cma_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cma_device *devices;
static int n_devices;
static int init_rc;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_t cm_thread;
static bool cm_thread_running;
static volatile bool cm_thread_stop;

uint64_t cma_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

unsigned cma_qp_queued(struct ibv_context *verbs, uint32_t qpn)
{
	const struct rocemu_cm_hooks *h = rocemu_cm_hooks(verbs);

	return h ? h->qp_queued(verbs, qpn) : 0;
}

static void gsi_post_recv(struct cma_device *d, unsigned slot)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(d->buf + (size_t)slot * CMA_GSI_BUF),
			      .length = CMA_GSI_BUF,
			      .lkey = d->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(d->gsi, &wr, &bad))
		fprintf(stderr, "rocemu rdmacm: cannot repost a GSI receive\n");
}

/* The lanes of an IB port width code (ibv_port_attr.active_width). */
static int width_lanes(uint8_t width)
{
	switch (width) {
	case 1:
		return 1;
	case 2:
		return 4;
	case 4:
		return 8;
	case 8:
		return 12;
	case 16:
		return 2;
	default:
		return 0;
	}
}

/* The port's link rate as a REQ's packet rate (IBA 12.6.5): lanes x lane
 * speed, as Linux's rdma_cm gives the netdev's speed for RoCE; IBV_RATE_MAX
 * (0, "the port's current rate") when unknown. */
static enum ibv_rate port_rate(uint8_t width, uint8_t speed)
{
	static const struct {
		uint8_t code; /* ibv_port_attr.active_speed */
		int mbps;     /* per lane */
	} lane[] = {{1, 2500},	 {2, 5000},   {4, 10000},  {8, 10000},
		    {16, 14000}, {32, 25000}, {64, 50000}, {128, 100000}};

	for (size_t i = 0; i < sizeof(lane) / sizeof(lane[0]); i++)
		if (lane[i].code == speed && width_lanes(width))
			return mbps_to_ibv_rate(width_lanes(width) * lane[i].mbps);
	return IBV_RATE_MAX;
}

static int gsi_open(struct cma_device *d)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(d->verbs, &da) || ibv_query_port(d->verbs, 1, &pa))
		return -EIO;
	d->guid = da.node_guid;
	d->active_mtu = pa.active_mtu;
	d->max_rd_atom = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
	d->rate = (uint8_t)port_rate(pa.active_width, pa.active_speed);
	d->gid_len = pa.gid_tbl_len > 16 ? 16 : pa.gid_tbl_len;
	for (int i = 0; i < d->gid_len; i++)
		if (ibv_query_gid(d->verbs, 1, i, &d->gids[i]))
			memset(&d->gids[i], 0, sizeof(d->gids[i]));

	d->pd = ibv_alloc_pd(d->verbs);
	d->ch = ibv_create_comp_channel(d->verbs);
	if (!d->pd || !d->ch)
		return -ENOMEM;
	fcntl(d->ch->fd, F_SETFL, fcntl(d->ch->fd, F_GETFL) | O_NONBLOCK);
	d->cq = ibv_create_cq(d->verbs, CMA_GSI_RECVS + CMA_GSI_SENDS, NULL, d->ch, 0);
	size_t len = (size_t)(CMA_GSI_RECVS + CMA_GSI_SENDS) * CMA_GSI_BUF;
	d->buf = calloc(1, len);
	if (!d->cq || !d->buf)
		return -ENOMEM;
	d->mr = ibv_reg_mr(d->pd, d->buf, len, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr_ex qa = {
	    .send_cq = d->cq,
	    .recv_cq = d->cq,
	    .cap = {.max_send_wr = CMA_GSI_SENDS,
		    .max_recv_wr = CMA_GSI_RECVS,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	    .qp_type = IBV_QPT_UD,
	    .pd = d->pd,
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
	    .create_flags = IBV_QP_CREATE_SOURCE_QPN,
	    .source_qpn = 1,
	};
	if (!d->mr)
		return -ENOMEM;
	d->gsi = ibv_create_qp_ex(d->verbs, &qa);
	if (!d->gsi)
		return -errno;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x80010000};
	if (ibv_modify_qp(d->gsi, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -EIO;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(d->gsi, &a, IBV_QP_STATE))
		return -EIO;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(d->gsi, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -EIO;
	for (unsigned i = 0; i < CMA_GSI_RECVS; i++)
		gsi_post_recv(d, i);
	ibv_req_notify_cq(d->cq, 0);
	return 0;
}

int cma_gsi_send(struct cma_device *d, int sgid_index, const union ibv_gid *dgid, uint8_t tclass,
		 uint8_t sl, const uint8_t *mad)
{
	unsigned slot = CMA_GSI_RECVS + d->send_next % CMA_GSI_SENDS;
	struct ibv_ah *ah = NULL;
	unsigned i;

	/* The engine reads the buffer and the AH when it transmits, later: a
	 * slot or an AH still owned by a posted send is never reused (a flood of
	 * MADs to answer from many hosts must not free an AH under the engine). */
	if (d->slot_ah[slot - CMA_GSI_RECVS]) {
		CMA_COUNT(tx_busy);
		return -EAGAIN;
	}
	for (i = 0; i < d->n_ah; i++)
		if (d->ah[i].sgid_index == sgid_index && d->ah[i].tclass == tclass &&
		    d->ah[i].sl == sl && !memcmp(&d->ah[i].dgid, dgid, 16)) {
			ah = d->ah[i].ah;
			break;
		}
	if (!ah) {
		if (d->n_ah == CMA_MAX_AH) { /* the oldest idle one goes */
			unsigned v;
			for (v = 0; v < d->n_ah && d->ah[v].pending; v++)
				;
			if (v == d->n_ah) {
				CMA_COUNT(tx_busy);
				return -EAGAIN;
			}
			ibv_destroy_ah(d->ah[v].ah);
			memmove(&d->ah[v], &d->ah[v + 1], sizeof(d->ah[0]) * (d->n_ah - v - 1));
			d->n_ah--;
		}
		struct ibv_ah_attr aa = {.is_global = 1,
					 .sl = sl,
					 .port_num = 1,
					 .grh = {.dgid = *dgid,
						 .sgid_index = (uint8_t)sgid_index,
						 .hop_limit = 64,
						 .traffic_class = tclass}};
		ah = ibv_create_ah(d->pd, &aa);
		if (!ah)
			return -errno;
		i = d->n_ah++;
		d->ah[i].dgid = *dgid;
		d->ah[i].sgid_index = sgid_index;
		d->ah[i].tclass = tclass;
		d->ah[i].sl = sl;
		d->ah[i].ah = ah;
		d->ah[i].pending = 0;
	}
	uint8_t *p = d->buf + (size_t)slot * CMA_GSI_BUF;
	memcpy(p, mad, CM_MAD_SIZE);
	struct ibv_sge sge = {.addr = (uintptr_t)p, .length = CM_MAD_SIZE, .lkey = d->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = slot,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 1;
	wr.wr.ud.remote_qkey = 0x80010000;
	int rc = ibv_post_send(d->gsi, &wr, &bad);
	if (rc)
		return -rc;
	d->send_next++;
	d->slot_ah[slot - CMA_GSI_RECVS] = ah;
	d->ah[i].pending++;
	return 0;
}

/* A send completed (or was flushed): its slot and its AH are free again. */
static void gsi_send_done(struct cma_device *d, uint64_t wr_id)
{
	if (wr_id < CMA_GSI_RECVS || wr_id >= CMA_GSI_RECVS + CMA_GSI_SENDS)
		return;
	struct ibv_ah **sa = &d->slot_ah[wr_id - CMA_GSI_RECVS];
	for (unsigned i = 0; *sa && i < d->n_ah; i++)
		if (d->ah[i].ah == *sa && d->ah[i].pending) {
			d->ah[i].pending--;
			break;
		}
	*sa = NULL;
}

/* Drain the GSI CQ: MADs to the state machines, receive slots back. */
static void gsi_drain(struct cma_device *d)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(d->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id >= CMA_GSI_RECVS) {
				gsi_send_done(d, wc[i].wr_id);
				continue;
			}
			if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= CMA_GSI_BUF) {
				const uint8_t *p = d->buf + wc[i].wr_id * CMA_GSI_BUF;
				cma_handle_mad(d, p, p + 40);
			} else if (wc[i].status == IBV_WC_SUCCESS) {
				CMA_COUNT(drop_short); /* a MAD is 256 bytes (13.4.2) */
			}
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
				gsi_post_recv(d, (unsigned)wc[i].wr_id);
		}
	}
}

static void *cm_thread_main(void *arg)
{
	struct pollfd pfd[ROCEMU_RDMACM_MAX_DEVICES];

	(void)arg;
	for (int i = 0; i < n_devices; i++)
		pfd[i] = (struct pollfd){.fd = devices[i].ch->fd, .events = POLLIN};
	while (!cm_thread_stop) {
		pthread_mutex_lock(&cma_lock);
		uint64_t now = cma_now_ns(), next = cma_next_deadline();
		pthread_mutex_unlock(&cma_lock);
		/* Wake at the next retransmission, and at least every 100 ms: a safety
		 * net for a notification raced away, not a polling loop. */
		int timeout = 100;
		if (next && next > now && (next - now) / 1000000 < 100)
			timeout = (int)((next - now) / 1000000) + 1;
		else if (next && next <= now)
			timeout = 0;
		poll(pfd, (nfds_t)n_devices, timeout);
		pthread_mutex_lock(&cma_lock);
		for (int i = 0; i < n_devices; i++) {
			struct ibv_cq *cq;
			void *ctx;
			if (ibv_get_cq_event(devices[i].ch, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				ibv_req_notify_cq(cq, 0);
			}
			gsi_drain(&devices[i]);
		}
		cma_run_timers(cma_now_ns());
		pthread_mutex_unlock(&cma_lock);
	}
	return NULL;
}

static void do_init(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0) {
		init_rc = -ENODEV;
		if (list)
			ibv_free_device_list(list);
		return;
	}
	if (n > ROCEMU_RDMACM_MAX_DEVICES)
		n = ROCEMU_RDMACM_MAX_DEVICES;
	devices = calloc((size_t)n, sizeof(*devices));
	if (!devices) {
		init_rc = -ENOMEM;
		return;
	}
	for (int i = 0; i < n; i++) {
		struct cma_device *d = &devices[n_devices];
		d->verbs = ibv_open_device(list[i]);
		if (!d->verbs)
			continue;
		int rc = gsi_open(d);
		if (rc < 0) {
			fprintf(stderr, "rocemu rdmacm: %s: no GSI QP: %s\n",
				ibv_get_device_name(list[i]), strerror(-rc));
			continue; /* objects stay until exit; the device is not used */
		}
		n_devices++;
	}
	ibv_free_device_list(list);
	if (n_devices == 0) {
		init_rc = -ENODEV;
		return;
	}
	if (pthread_create(&cm_thread, NULL, cm_thread_main, NULL))
		init_rc = -EAGAIN;
	else
		cm_thread_running = true;
}

/* Before libibverbs' destructor closes the engines: stop using them. */
__attribute__((destructor)) static void cma_fini(void)
{
	if (!cm_thread_running)
		return;
	cm_thread_stop = true;
	pthread_join(cm_thread, NULL);
	cm_thread_running = false;
	cma_stats_report();
}

int cma_init(void)
{
	pthread_once(&init_once, do_init);
	return init_rc;
}

struct cma_device *cma_devices(int *n)
{
	*n = n_devices;
	return devices;
}

struct cma_device *cma_device_of(struct ibv_context *verbs)
{
	for (int i = 0; i < n_devices; i++)
		if (devices[i].verbs == verbs)
			return &devices[i];
	return NULL;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	int rc = cma_init(), n = 0;
	struct cma_device *d = rc < 0 ? NULL : cma_devices(&n);
	struct ibv_context **list = calloc((size_t)n + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = d[i].verbs;
	if (num_devices)
		*num_devices = n;
	return list;
}
ROCEMU_PUBLIC(rdma_get_devices)

void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
ROCEMU_PUBLIC(rdma_free_devices)
