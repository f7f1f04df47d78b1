/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over rocemu's CM with the real plumbing under it (issue
 * 18, fuzzing): two rocemu devices in this process on a ring pair (our
 * libibverbs, real engines), the CM's GSI QP (QP1) on each, and a hostile
 * UD QP on device A whose SENDs carry the fuzzer's MADs to device B's QP1
 * as RoCE frames: the engine's UD receive, the GRH area, the GSI receive
 * ring, then cma_handle_mad. Accepting a request creates a real RC QP and
 * moves it through INIT/RTR (rdma_accept). fuzz_cm.c fuzzes the same state
 * machine on a stub device, quicker; this one finds what only the plumbing
 * does (the GRH the engine writes, QP creation and modify, GSI sends and
 * their completions, AH caching).
 *
 * The CM thread is stopped: every pass over the GSI receive queues runs
 * here, so an input does the same thing whenever it runs. device.c is
 * included for that (its static GSI drain); cma.c, cm_mad.c and addr.c are
 * compiled in (coverage); the verbs are our libibverbs.
 *
 * Input, as fuzz_cm's (its corpus seeds this one): records [flags:1][MAD:
 * 256 bytes, zero-filled when short]. flags bits 0-2: patch the MAD's comm
 * IDs with those of id (n-1) of the run's table (0: no patch); bit 3: sent
 * from A's first address 10.82.0.2 (where the active ids connect), else
 * from its second, 10.82.0.3; bit 5: advance the CM timers 1.2 s; bits
 * 6-7: what the program does with CONNECT_REQUEST / CONNECT_RESPONSE
 * (accept/establish, reject, disconnect an established id, nothing). Each
 * run: an RC and a UD listener on B (10.82.0.1), an RC and a UD id on B that
 * connect to 10.82.0.2; all destroyed at the end, so leaks show.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../verbs-provider/rdmacm/device.c"

#define MAX_IDS	 8
#define GSI_QKEY 0x80010000u
#define B_IP	 "10.82.0.1"
#define A_IP	 "10.82.0.2"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	bool ready;
	struct cma_device *a, *b;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *ud;
	struct ibv_mr *mr;
	struct ibv_ah *ah[2]; /* to B's QP1 from A's address 1 and 2 */
	uint8_t buf[256];
	uint64_t cm_timer_offset_ns;
} Z;

struct run {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ids[MAX_IDS];
	unsigned n;
};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_cm_engine: set-up failed: %s\n", what);
	exit(1);
}

static char config_path[64];

static void unlink_config(void)
{
	if (config_path[0])
		unlink(config_path);
}

static void write_config(void)
{
	static const char cfg[] = "[rocemu0]\nport = ring:fzcm:a\nip = 10.82.0.2/24\n"
				  "ip = 10.82.0.3/24\nmbufs = 2048\n"
				  "[rocemu1]\nport = ring:fzcm:b\nip = " B_IP "/24\nmbufs = 2048\n";
	char path[] = "/tmp/rocemu-fzcm-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0 || write(fd, cfg, sizeof(cfg) - 1) != (ssize_t)(sizeof(cfg) - 1))
		die("config");
	close(fd);
	setenv("ROCEMU_CONFIG", path, 1);
	setenv("ROCEMU_DEVICE", "", 1);
	snprintf(config_path, sizeof(config_path), "%s", path);
	atexit(unlink_config);
}

static void ud_ready(void)
{
	struct ibv_qp_init_attr ia = {
	    .send_cq = Z.cq,
	    .recv_cq = Z.cq,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = IBV_QPT_UD,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = GSI_QKEY};

	Z.ud = ibv_create_qp(Z.pd, &ia);
	if (!Z.ud ||
	    ibv_modify_qp(Z.ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("UD QP");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(Z.ud, &a, IBV_QP_STATE))
		die("UD RTR");
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(Z.ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD RTS");
	for (int i = 0; i < 2; i++) {
		struct ibv_ah_attr aa = {.is_global = 1,
					 .port_num = 1,
					 .grh = {.sgid_index = (uint8_t)(1 + i), .hop_limit = 64}};

		aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xff;
		inet_pton(AF_INET, B_IP, aa.grh.dgid.raw + 12);
		Z.ah[i] = ibv_create_ah(Z.pd, &aa);
		if (!Z.ah[i])
			die("AH");
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	write_config();
	if (cma_init() < 0 || n_devices != 2)
		die("two rocemu devices with a GSI QP each");
	/* the CM thread is not wanted: this target drives the GSI itself */
	cm_thread_stop = true;
	pthread_join(cm_thread, NULL);
	cm_thread_running = false;
	Z.a = &devices[0];
	Z.b = &devices[1];
	Z.pd = ibv_alloc_pd(Z.a->verbs);
	Z.cq = ibv_create_cq(Z.a->verbs, 128, NULL, NULL, 0);
	Z.mr = Z.pd ? ibv_reg_mr(Z.pd, Z.buf, sizeof(Z.buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!Z.pd || !Z.cq || !Z.mr)
		die("hostile sender's objects");
	ud_ready();
	Z.ready = true;
	return 0;
}

/* What the CM thread would do: drain both GSIs and run the CM timers, until
 * a few passes find nothing more (frames in flight on the ring need their
 * engines' progress, which the provider runs inside ibv_poll_cq). */
static void cm_passes(void)
{
	for (int idle = 0, i = 0; idle < 3 && i < 200; i++) {
		struct ibv_wc wc[16];
		int got = 0;

		pthread_mutex_lock(&cma_lock);
		for (int k = 0; k < n_devices; k++) {
			int n;

			while ((n = ibv_poll_cq(devices[k].cq, 16, wc)) > 0) {
				got += n;
				for (int j = 0; j < n; j++) {
					if (wc[j].wr_id >= CMA_GSI_RECVS) {
						gsi_send_done(&devices[k], wc[j].wr_id);
						continue;
					}
					if (wc[j].status == IBV_WC_SUCCESS &&
					    wc[j].byte_len >= CMA_GSI_BUF) {
						const uint8_t *p =
						    devices[k].buf + wc[j].wr_id * CMA_GSI_BUF;
						cma_handle_mad(&devices[k], p, p + 40);
					}
					if (wc[j].status != IBV_WC_WR_FLUSH_ERR)
						gsi_post_recv(&devices[k], (unsigned)wc[j].wr_id);
				}
			}
		}
		cma_run_timers(cma_now_ns() + Z.cm_timer_offset_ns);
		pthread_mutex_unlock(&cma_lock);
		got += ibv_poll_cq(Z.cq, 16, wc) > 0;
		idle = got ? 0 : idle + 1;
	}
}

static void send_mad(const uint8_t *mad, int from)
{
	struct ibv_sge sge = {(uintptr_t)Z.buf, 256, Z.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr = {.ud = {.ah = Z.ah[from],
					       .remote_qpn = 1,
					       .remote_qkey = GSI_QKEY}}},
			   *bad;

	memcpy(Z.buf, mad, 256);
	if (ibv_post_send(Z.ud, &wr, &bad))
		return;
	cm_passes();
}

static struct rdma_cm_id *new_id(struct run *r, enum rdma_port_space ps)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(r->ch, &id, NULL, ps))
		die("rdma_create_id");
	return id;
}

static void sin_of(struct sockaddr_in *s, const char *ip, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
}

static struct rdma_cm_id *listener(struct run *r, enum rdma_port_space ps, uint16_t port)
{
	struct rdma_cm_id *id = new_id(r, ps);
	struct sockaddr_in a;

	sin_of(&a, B_IP, port);
	if (rdma_bind_addr(id, (struct sockaddr *)&a) || rdma_listen(id, 8))
		die("listen");
	return id;
}

static struct rdma_cm_id *active(struct run *r, enum rdma_port_space ps, uint16_t port)
{
	struct rdma_cm_id *id = new_id(r, ps);
	struct sockaddr_in src, dst;
	struct rdma_conn_param p = {
	    .qp_num = 0x321, .responder_resources = 1, .initiator_depth = 1};

	sin_of(&src, B_IP, 0);
	sin_of(&dst, A_IP, port);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 100) ||
	    rdma_resolve_route(id, 100) || rdma_connect(id, &p))
		die("connect");
	return id;
}

/* A real QP for a request the program accepts (rdma_accept moves it). */
static void give_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
	    .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
	    .qp_type = id->qp_type == IBV_QPT_UD ? IBV_QPT_UD : IBV_QPT_RC,
	};

	rdma_create_qp(id, NULL, &qa);
}

static void handle_events(struct run *r, uint8_t action)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(r->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		volatile uint8_t sink = 0;
		const uint8_t *pd = ev->param.conn.private_data;

		for (unsigned i = 0; pd && i < ev->param.conn.private_data_len; i++)
			sink ^= pd[i];
		(void)sink;
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (r->n == MAX_IDS) {
				rdma_reject(id, NULL, 0);
				rdma_destroy_id(id);
				continue;
			}
			r->ids[r->n++] = id;
			if (action == 0) {
				struct rdma_conn_param p = {.responder_resources = 1,
							    .initiator_depth = 1};

				give_qp(id);
				rdma_accept(id, &p);
			} else if (action == 1) {
				rdma_reject(id, "no", 2);
			}
		} else if (type == RDMA_CM_EVENT_CONNECT_RESPONSE && action == 0) {
			rdma_establish(id);
		}
	}
	if (action == 2)
		for (unsigned i = 0; i < r->n; i++)
			if (((struct cma_id *)r->ids[i])->state == CMA_ESTABLISHED &&
			    r->ids[i]->qp_type != IBV_QPT_UD) {
				rdma_disconnect(r->ids[i]);
				break;
			}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r = {0};

	if (!Z.ready)
		LLVMFuzzerInitialize(NULL, NULL);
	Z.cm_timer_offset_ns = 0;
	r.ch = rdma_create_event_channel();
	if (!r.ch)
		die("channel");
	fcntl(r.ch->fd, F_SETFL, fcntl(r.ch->fd, F_GETFL) | O_NONBLOCK);
	r.ids[r.n++] = listener(&r, RDMA_PS_TCP, 7471);
	r.ids[r.n++] = listener(&r, RDMA_PS_UDP, 7472);
	r.ids[r.n++] = active(&r, RDMA_PS_TCP, 9000);
	r.ids[r.n++] = active(&r, RDMA_PS_UDP, 9001);
	cm_passes();
	handle_events(&r, 3);

	while (size > 1) {
		uint8_t flags = data[0];
		size_t len = size - 1 < CM_MAD_SIZE ? size - 1 : CM_MAD_SIZE;
		uint8_t mad[CM_MAD_SIZE] = {0};
		unsigned k = flags & 7;

		memcpy(mad, data + 1, len);
		data += 1 + len;
		size -= 1 + len;
		if (k && k - 1 < r.n) {
			const struct cma_id *c = (const struct cma_id *)r.ids[k - 1];
			uint16_t attr = (uint16_t)(mad[16] << 8 | mad[17]);
			uint32_t local = htonl(c->remote_comm_id), remote = htonl(c->local_comm_id);

			if (attr == CM_ATTR_SIDR_REP || attr == CM_ATTR_SIDR_REQ) {
				memcpy(mad + 24, &remote, 4);
			} else {
				memcpy(mad + 24, &local, 4);
				memcpy(mad + 28, &remote, 4);
			}
		}
		send_mad(mad, (flags & 8) ? 0 : 1);
		if (flags & 32) {
			Z.cm_timer_offset_ns += 1200000000ull;
			cm_passes();
		}
		handle_events(&r, flags >> 6);
		cm_passes();
	}

	for (unsigned i = r.n; i-- > 0;) {
		if (r.ids[i]->qp)
			rdma_destroy_qp(r.ids[i]);
		rdma_destroy_id(r.ids[i]);
	}
	rdma_destroy_event_channel(r.ch);
	cm_passes();
	return 0;
}
