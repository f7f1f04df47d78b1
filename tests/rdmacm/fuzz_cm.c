/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over rocemu's CM receive path: cm_mad_parse_hdr and the
 * decoders, and cma_handle_mad, the function the CM thread calls for every
 * MAD that reaches QP1, with the state machine of verbs-provider/rdmacm on a
 * fake device (cm_stub.c, no engine).
 *
 * Each run starts from the same ids: an RC listener and a UD listener on
 * 10.0.0.1, an RC id and a UD id that sent their REQ / SIDR_REQ to
 * 10.0.0.2. The input is a sequence of records:
 *   byte 0   flags: bits 0-2 patch the comm IDs of the MAD with those of
 *            id (n-1) of the table (0: no patch); bit 3 the sender is the
 *            peer 10.0.0.2, else 10.0.0.3; bit 4 an IPv6 GRH (source GID
 *            from the next 16 bytes); bit 5 advance the clock 1.2 s and run
 *            the timers; bits 6-7 what the program does with a
 *            CONNECT_REQUEST/CONNECT_RESPONSE (accept/establish, reject,
 *            disconnect the first established id, nothing)
 *   then up to 256 bytes of MAD (a short tail is zero-filled; the real
 *   length also goes through cm_mad_parse_hdr).
 * Ids from CONNECT_REQUEST events join the table (8 entries); every id and
 * the channel are destroyed at the end, so leaks show.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "cm_stub.h"

#define MAX_IDS 8
#define REC_LEN (1 + CM_MAD_SIZE)

struct run {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ids[MAX_IDS];
	unsigned n;
};

static void sin_of(struct sockaddr_in *s, uint8_t last, uint16_t port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(0x0a000000u | last);
}

static struct rdma_cm_id *listener(struct run *r, enum rdma_port_space ps, uint16_t port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a;

	sin_of(&a, 1, port);
	if (rdma_create_id(r->ch, &id, NULL, ps))
		abort();
	if (rdma_bind_addr(id, (struct sockaddr *)&a) || rdma_listen(id, 8))
		abort();
	return id;
}

static struct rdma_cm_id *active(struct run *r, enum rdma_port_space ps, uint16_t port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in a;
	struct rdma_conn_param p = {
	    .qp_num = 0x321, .responder_resources = 1, .initiator_depth = 1};

	sin_of(&a, 2, port);
	if (rdma_create_id(r->ch, &id, NULL, ps))
		abort();
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 100) ||
	    rdma_resolve_route(id, 100) || rdma_connect(id, &p))
		abort();
	return id;
}

static void handle_events(struct run *r, uint8_t action)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(r->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		/* private data is readable up to its stated length */
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
			struct rdma_conn_param p = {.qp_num = 0x654};
			if (action == 0)
				rdma_accept(id, &p);
			else if (action == 1)
				rdma_reject(id, "no", 2);
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
	struct cm_mad_hdr h;

	r.ch = rdma_create_event_channel();
	if (!r.ch)
		abort();
	fcntl(r.ch->fd, F_SETFL, fcntl(r.ch->fd, F_GETFL) | O_NONBLOCK);
	r.ids[r.n++] = listener(&r, RDMA_PS_TCP, 7471);
	r.ids[r.n++] = listener(&r, RDMA_PS_UDP, 7472);
	r.ids[r.n++] = active(&r, RDMA_PS_TCP, 9000);
	r.ids[r.n++] = active(&r, RDMA_PS_UDP, 9001);
	handle_events(&r, 3);

	while (size > 1) {
		uint8_t flags = data[0];
		size_t len = size - 1 < CM_MAD_SIZE ? size - 1 : CM_MAD_SIZE;
		uint8_t mad[CM_MAD_SIZE] = {0}, grh[40];

		memcpy(mad, data + 1, len);
		data += 1 + len;
		size -= 1 + len;
		(void)cm_mad_parse_hdr(mad, len, &h);
		unsigned k = flags & 7;
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
		stub_grh_v4(grh, (flags & 8) ? 2 : 3);
		if (flags & 16) {
			memset(grh, 0, 40);
			grh[0] = 0x60;
			memcpy(grh + 8, mad + 240, 16); /* source GID from the MAD's tail */
		}
		stub_reset_sent();
		stub_rx(grh, mad);
		if (flags & 32)
			stub_advance(1200000000ull);
		handle_events(&r, flags >> 6);
	}

	for (unsigned i = r.n; i-- > 0;)
		rdma_destroy_id(r.ids[i]);
	rdma_destroy_event_channel(r.ch);
	return 0;
}
