/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu's librdmacm inside one process: both ends of each connection are
 * rdma_cm ids of this process, and the CM MADs (REQ/REP/RTU/DREQ/DREP/REJ,
 * SIDR_REQ/SIDR_REP) go through the GSI QP and the engine's loopback
 * (one device) or an in-process ring pair (two devices).
 *  - RC: connect with private data both ways, SEND data checked, disconnect
 *    (DISCONNECTED on both sides), on one device and across two;
 *  - rdma_reject: REJECTED (consumer defined, 28) with the private data;
 *  - no listener on the port: REJECTED (invalid service ID, 8);
 *  - UD (RDMA_PS_UDP): SIDR gives the peer's QPN and Q_Key; a datagram arrives;
 *  - synchronous ids (rdma_create_ep / rdma_get_request without channels).
 * Every wait is bounded (poll on the channel fd).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../rdmacm/cm_conn.h"

#define IP_A "10.79.1.1"
#define IP_B "10.79.1.2"

/* Connect an RC pair (server on src_ip:port, client resolving it), send
 * 4096 bytes client -> server, disconnect from the client. */
static void rc_pair(const char *client_ip, const char *server_ip, uint16_t port)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *server;
	assert_non_null(sch);
	assert_non_null(cch);
	listen = cmt_listen(sch, RDMA_PS_TCP, server_ip, port);
	assert_int_equal(ntohs(rdma_get_src_port(listen)), port);
	client = cmt_resolve(cch, RDMA_PS_TCP, (void *)0x1234, client_ip, server_ip, port);
	cmt_create_qp(client, IBV_QPT_RC);

	struct rdma_conn_param cp = {.private_data = "hello",
				     .private_data_len = 6,
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	assert_int_equal(rdma_connect(client, &cp), 0);

	struct rdma_cm_event *ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_ptr_equal(ev->listen_id, listen);
	server = ev->id;
	assert_string_equal((const char *)ev->param.conn.private_data, "hello");
	assert_int_equal(ev->param.conn.responder_resources, 1);
	assert_int_equal(ntohs(rdma_get_dst_port(server)), ntohs(rdma_get_src_port(client)));
	struct sockaddr_in *peer = (struct sockaddr_in *)rdma_get_peer_addr(server);
	struct sockaddr_in *mine = (struct sockaddr_in *)rdma_get_local_addr(client);
	assert_int_equal(peer->sin_addr.s_addr, mine->sin_addr.s_addr);
	cmt_create_qp(server, IBV_QPT_RC);
	uint8_t *rbuf = calloc(1, 4096), *sbuf = malloc(4096);
	for (int i = 0; i < 4096; i++)
		sbuf[i] = (uint8_t)(i * 7 + 3);
	struct ibv_mr *rmr = rdma_reg_msgs(server, rbuf, 4096);
	struct ibv_mr *smr = rdma_reg_msgs(client, sbuf, 4096);
	assert_non_null(rmr);
	assert_non_null(smr);
	assert_int_equal(rdma_post_recv(server, (void *)1, rbuf, 4096, rmr), 0);
	struct rdma_conn_param sp = {.private_data = "world",
				     .private_data_len = 6,
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .rnr_retry_count = 7};
	assert_int_equal(rdma_accept(server, &sp), 0);
	cmt_ack(ev);
	ev = tu_expect(cch, RDMA_CM_EVENT_ESTABLISHED);
	assert_string_equal((const char *)ev->param.conn.private_data, "world");
	assert_ptr_equal(ev->id->context, (void *)0x1234);
	cmt_ack(ev);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_ESTABLISHED));

	assert_int_equal(rdma_post_send(client, (void *)2, sbuf, 4096, smr, IBV_SEND_SIGNALED), 0);
	struct ibv_wc wc = tu_poll_one(client->send_cq);
	assert_int_equal(wc.wr_id, 2);
	wc = tu_poll_one(server->recv_cq);
	assert_int_equal(wc.byte_len, 4096);
	assert_memory_equal(rbuf, sbuf, 4096);

	assert_int_equal(rdma_disconnect(client), 0);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_DISCONNECTED));
	assert_int_equal(rdma_disconnect(server), 0); /* after DREQ: nothing left to do */

	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	cmt_destroy(server, client, listen);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
	free(rbuf);
	free(sbuf);
}

static void rc_one_device(void **state)
{
	(void)state;
	rc_pair(IP_A, IP_A, 7471); /* client and server on rocemu0: engine loopback */
}

static void rc_two_devices(void **state)
{
	(void)state;
	rc_pair(IP_A, IP_B, 7472); /* client bound to rocemu0, server on rocemu1: the ring */
}

/*
 * ECE through rocemu's CM between two devices (the REQ and REP over the GSI
 * QPs and the ring): the programs manage their QPs (rdma_set_local_ece,
 * rdma_get_remote_ece, rdma_establish), each side reads what the other
 * offered; a QP's own ECE (ibv_query_ece/ibv_set_ece): rocemu's vendor ID,
 * no options; and a connection with managed QPs negotiates by itself.
 */
static void ece_two_devices(void **state)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *listen, *client, *server;
	struct ibv_ece ece;

	(void)state;
	listen = cmt_listen(sch, RDMA_PS_TCP, IP_B, 7476);
	client = cmt_resolve(cch, RDMA_PS_TCP, NULL, IP_A, IP_B, 7476);
	struct ibv_ece offer = {.vendor_id = 0x123456, .options = 0x0f};
	assert_int_equal(rdma_set_local_ece(client, &offer), 0);
	struct rdma_conn_param cp = {.qp_num = 0x4321, .retry_count = 7};
	assert_int_equal(rdma_connect(client, &cp), 0);
	struct rdma_cm_event *ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	server = ev->id;
	assert_int_equal(rdma_get_remote_ece(server, &ece), 0);
	assert_int_equal(ece.vendor_id, 0x123456);
	assert_int_equal(ece.options, 0x0f);
	struct ibv_ece kept = {.vendor_id = 0x123456, .options = 0x05};
	assert_int_equal(rdma_set_local_ece(server, &kept), 0);
	struct rdma_conn_param sp = {.qp_num = 0x8765};
	assert_int_equal(rdma_accept(server, &sp), 0);
	cmt_ack(ev);
	ev = tu_expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(ev->param.conn.qp_num, 0x8765);
	cmt_ack(ev);
	assert_int_equal(rdma_get_remote_ece(client, &ece), 0);
	assert_int_equal(ece.vendor_id, 0x123456);
	assert_int_equal(ece.options, 0x05);
	assert_int_equal(rdma_establish(client), 0);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_ESTABLISHED));
	assert_int_equal(rdma_disconnect(client), 0);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_destroy(server, client, listen);

	/* managed QPs: each offers its QP's ECE, the connection is made */
	listen = cmt_listen(sch, RDMA_PS_TCP, IP_B, 7477);
	client = cmt_resolve(cch, RDMA_PS_TCP, NULL, IP_A, IP_B, 7477);
	cmt_create_qp(client, IBV_QPT_RC);
	assert_int_equal(ibv_query_ece(client->qp, &ece), 0);
	assert_int_equal(ece.vendor_id, 0xffffff); /* ibv_query_device's vendor_id */
	assert_int_equal(ece.options, 0);
	ece.vendor_id = 0x02c9; /* another vendor's */
	assert_int_equal(ibv_set_ece(client->qp, &ece), EINVAL);
	ece = (struct ibv_ece){.vendor_id = 0xffffff, .comp_mask = 1};
	assert_int_equal(ibv_set_ece(client->qp, &ece), EINVAL);
	ece = (struct ibv_ece){.vendor_id = 0xffffff, .options = 0xff};
	assert_int_equal(ibv_set_ece(client->qp, &ece), 0);
	assert_int_equal(ibv_query_ece(client->qp, &ece), 0);
	assert_int_equal(ece.options, 0); /* rocemu implements none of them */
	assert_int_equal(rdma_set_local_ece(client, &offer), -1); /* it has a QP */
	assert_int_equal(errno, EINVAL);
	struct rdma_conn_param cp2 = {.retry_count = 7};
	assert_int_equal(rdma_connect(client, &cp2), 0);
	ev = tu_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	server = ev->id;
	assert_int_equal(rdma_get_remote_ece(server, &ece), 0);
	assert_int_equal(ece.vendor_id, 0xffffff);
	cmt_create_qp(server, IBV_QPT_RC);
	struct rdma_conn_param sp2 = {.rnr_retry_count = 7};
	assert_int_equal(rdma_accept(server, &sp2), 0);
	cmt_ack(ev);
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_ESTABLISHED));
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_ESTABLISHED));
	assert_int_equal(rdma_disconnect(client), 0);
	cmt_ack(tu_expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_ack(tu_expect(cch, RDMA_CM_EVENT_DISCONNECTED));
	cmt_destroy(server, client, listen);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

/* Resolve + connect a client to ip:port on channel cch; returns the id. */
static struct rdma_cm_id *connect_client(struct rdma_event_channel *cch, const char *ip,
					 uint16_t port, const char *pdata)
{
	struct rdma_cm_id *c = cmt_resolve(cch, RDMA_PS_TCP, NULL, NULL, ip, port);
	cmt_create_qp(c, IBV_QPT_RC);
	struct rdma_conn_param cp = {.private_data = pdata,
				     .private_data_len = pdata ? (uint8_t)(strlen(pdata) + 1) : 0,
				     .retry_count = 7};
	assert_int_equal(rdma_connect(c, &cp), 0);
	return c;
}

static void rejected_by_listener(void **state)
{
	(void)state;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen = cmt_listen(ch, RDMA_PS_TCP, IP_A, 7473), *c;
	c = connect_client(ch, IP_A, 7473, "let me in");
	struct rdma_cm_event *ev = tu_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *s = ev->id;
	assert_string_equal((const char *)ev->param.conn.private_data, "let me in");
	assert_int_equal(rdma_reject(s, "no", 3), 0);
	cmt_ack(ev);
	ev = tu_expect(ch, RDMA_CM_EVENT_REJECTED);
	assert_ptr_equal(ev->id, c);
	assert_int_equal(ev->status, 28); /* consumer defined */
	assert_string_equal((const char *)ev->param.conn.private_data, "no");
	cmt_ack(ev);
	cmt_destroy(s, c, listen); /* s has no QP */
	rdma_destroy_event_channel(ch);
}

/* A client connecting to ip:port gets event type with status within
 * timeout_ms, and is then destroyed. */
static void connect_fails(const char *ip, uint16_t port, enum rdma_cm_event_type type, int status,
			  int timeout_ms)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *c = connect_client(ch, ip, port, NULL);
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	assert_int_equal(poll(&p, 1, timeout_ms), 1);
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	assert_string_equal(rdma_event_str(ev->event), rdma_event_str(type));
	assert_int_equal(ev->status, status);
	cmt_ack(ev);
	rdma_destroy_qp(c);
	assert_int_equal(rdma_destroy_id(c), 0);
	rdma_destroy_event_channel(ch);
}

static void rejected_no_listener(void **state)
{
	(void)state;
	connect_fails(IP_B, 7999, RDMA_CM_EVENT_REJECTED, 8 /* invalid service ID */, 10000);
}

/* A host that does not exist: the REQ is resent a bounded number of times,
 * then UNREACHABLE (never a hang); the GSI keeps working for others. */
static void unreachable_host(void **state)
{
	(void)state;
	connect_fails("10.79.1.99", 7477, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, 30000);
}

static void ud_sidr(void **state)
{
	(void)state;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen = cmt_listen(ch, RDMA_PS_UDP, IP_B, 7474), *s;
	struct rdma_cm_id *c = cmt_resolve(ch, RDMA_PS_UDP, NULL, NULL, IP_B, 7474);
	cmt_create_qp(c, IBV_QPT_UD);
	struct rdma_conn_param cp = {.private_data = "ud?", .private_data_len = 4};
	assert_int_equal(rdma_connect(c, &cp), 0);
	struct rdma_cm_event *ev = tu_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	assert_string_equal((const char *)ev->param.ud.private_data, "ud?");
	cmt_create_qp(s, IBV_QPT_UD);
	uint8_t *rbuf = calloc(1, 40 + 256);
	struct ibv_mr *rmr = rdma_reg_msgs(s, rbuf, 40 + 256);
	assert_int_equal(rdma_post_recv(s, (void *)7, rbuf, 40 + 256, rmr), 0);
	struct rdma_conn_param sp = {.qp_num = s->qp->qp_num};
	assert_int_equal(rdma_accept(s, &sp), 0);
	cmt_ack(ev);
	ev = tu_expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(ev->param.ud.qp_num, s->qp->qp_num);
	uint32_t qkey = ev->param.ud.qkey;
	struct ibv_ah *ah = ibv_create_ah(c->pd, &ev->param.ud.ah_attr);
	assert_non_null(ah);
	cmt_ack(ev);
	char msg[256];
	for (int i = 0; i < 256; i++)
		msg[i] = (char)(255 - i);
	struct ibv_mr *smr = rdma_reg_msgs(c, msg, sizeof(msg));
	assert_int_equal(rdma_post_ud_send(c, (void *)8, msg, sizeof(msg), smr, IBV_SEND_SIGNALED,
					   ah, s->qp->qp_num),
			 0);
	(void)qkey;
	tu_poll_one(c->send_cq);
	struct ibv_wc wc = tu_poll_one(s->recv_cq);
	assert_int_equal(wc.byte_len, 40 + 256);
	assert_memory_equal(rbuf + 40, msg, 256);
	ibv_destroy_ah(ah);
	rdma_dereg_mr(rmr);
	rdma_dereg_mr(smr);
	cmt_destroy(s, c, listen);
	rdma_destroy_event_channel(ch);
	free(rbuf);
}

static void unsupported_and_helpers(void **state)
{
	(void)state;
	int n = 0;
	struct ibv_context **devs = rdma_get_devices(&n);
	assert_non_null(devs);
	assert_int_equal(n, 2);
	assert_non_null(devs[0]);
	assert_null(devs[2]);
	rdma_free_devices(devs);
	assert_string_equal(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED), "RDMA_CM_EVENT_ESTABLISHED");

	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	assert_int_equal(rdma_getaddrinfo(IP_A, "7475", &hints, &res), 0);
	assert_non_null(res->ai_dst_addr);
	assert_int_equal(ntohs(((struct sockaddr_in *)res->ai_dst_addr)->sin_port), 7475);
	rdma_freeaddrinfo(res);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	struct sockaddr_in a = tu_addr(IP_A, 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
	assert_true(ntohs(rdma_get_src_port(id)) != 0); /* an ephemeral port */
	uint8_t tos = 32;
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
	int wide_tos = 32; /* the option is one byte, as Linux's CM takes it */
	errno = 0;
	assert_int_equal(
	    rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &wide_tos, sizeof(wide_tos)),
	    -1);
	assert_int_equal(errno, EINVAL);
	struct sockaddr_in mc = tu_addr("239.1.1.1", 0);
	errno = 0;
	assert_int_equal(rdma_join_multicast(id, (struct sockaddr *)&mc, NULL), -1);
	assert_int_equal(errno, EINVAL); /* a TCP id: multicast is for UD */
	{
		/* a UD id: the rules of rdma_join_multicast(3) and the JOIN event */
		struct rdma_cm_id *ud;
		struct rdma_cm_event *ev;
		struct sockaddr_in uni = tu_addr(IP_A, 0);
		struct rdma_cm_join_mc_attr_ex jx = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS,
						     .addr = (struct sockaddr *)&mc};
		int ctx_tag;

		assert_int_equal(rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP), 0);
		errno = 0;
		assert_int_equal(rdma_join_multicast(ud, (struct sockaddr *)&mc, NULL), -1);
		assert_int_equal(errno, EINVAL); /* neither bound nor resolved */
		assert_int_equal(rdma_bind_addr(ud, (struct sockaddr *)&a), 0);
		assert_int_equal(rdma_join_multicast(ud, (struct sockaddr *)&uni, NULL), -1);
		assert_int_equal(errno, EINVAL); /* not a group */
		assert_int_equal(rdma_join_multicast_ex(ud, &jx, NULL), -1);
		assert_int_equal(errno, EINVAL); /* no join flags */
		assert_int_equal(rdma_join_multicast(ud, (struct sockaddr *)&mc, &ctx_tag), 0);
		assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
		assert_int_equal(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
		assert_int_equal(ev->status, 0);
		assert_ptr_equal(ev->param.ud.private_data, &ctx_tag);
		assert_int_equal(ev->param.ud.qp_num, 0xFFFFFF);
		assert_int_equal(ev->param.ud.qkey, 0x01234567);
		assert_int_equal(ev->param.ud.ah_attr.is_global, 1);
		assert_memory_equal(ev->param.ud.ah_attr.grh.dgid.raw + 12,
				    ((const uint8_t[]){239, 1, 1, 1}), 4);
		assert_int_equal(ev->param.ud.ah_attr.grh.traffic_class, 0);
		assert_int_equal(rdma_ack_cm_event(ev), 0);
		assert_int_equal(rdma_join_multicast(ud, (struct sockaddr *)&mc, NULL), -1);
		assert_int_equal(errno, EADDRINUSE);
		struct sockaddr_in other = tu_addr("239.1.1.2", 0);
		assert_int_equal(rdma_leave_multicast(ud, (struct sockaddr *)&other), -1);
		assert_int_equal(errno, EADDRNOTAVAIL);
		assert_int_equal(rdma_leave_multicast(ud, (struct sockaddr *)&mc), 0);
		/* send-only through _ex, left by rdma_destroy_id */
		jx.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
		jx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
		assert_int_equal(rdma_join_multicast_ex(ud, &jx, NULL), 0);
		assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
		assert_int_equal(ev->event, RDMA_CM_EVENT_MULTICAST_JOIN);
		assert_int_equal(rdma_ack_cm_event(ev), 0);
		assert_int_equal(rdma_destroy_id(ud), 0);
	}
	/* A source address no rocemu device has. */
	struct rdma_cm_id *id2;
	assert_int_equal(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), 0);
	struct sockaddr_in bad = tu_addr("192.0.2.77", 0);
	assert_int_equal(rdma_bind_addr(id2, (struct sockaddr *)&bad), -1);
	assert_int_equal(errno, EADDRNOTAVAIL);
	/* A port in use. */
	struct rdma_cm_id *id3;
	assert_int_equal(rdma_create_id(ch, &id3, NULL, RDMA_PS_TCP), 0);
	struct sockaddr_in same = tu_addr(IP_A, ntohs(rdma_get_src_port(id)));
	assert_int_equal(rdma_bind_addr(id3, (struct sockaddr *)&same), -1);
	assert_int_equal(errno, EADDRINUSE);
	assert_int_equal(rdma_destroy_id(id3), 0);
	assert_int_equal(rdma_destroy_id(id2), 0);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* What libfabric's verbs provider asks of librdmacm (issue 14): a loopback
 * address binds with no device, and rdma_getaddrinfo without a name or
 * service takes its addresses from the hints. */
static void loopback_bind_and_hint_addresses(void **state)
{
	(void)state;
	struct rdma_cm_id *id;
	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST}, *res;
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", NULL, &hints, &res), 0);
	assert_non_null(res->ai_src_addr);
	assert_null(res->ai_dst_addr);
	assert_int_equal(rdma_bind_addr(id, res->ai_src_addr), 0);
	assert_null(id->verbs); /* no device has 127.0.0.1 */
	assert_true(rdma_get_src_port(id) != 0);
	rdma_freeaddrinfo(res);
	assert_int_equal(rdma_destroy_id(id), 0);
	struct sockaddr_in6 lo6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&lo6), 0);
	assert_null(id->verbs);
	assert_int_equal(rdma_destroy_id(id), 0);

	/* Addresses from the hints only: source (passive) and destination. */
	struct sockaddr_in src = tu_addr(IP_A, 7481), dst = tu_addr(IP_B, 7482);
	struct rdma_addrinfo h2 = {.ai_flags = RAI_PASSIVE,
				   .ai_src_addr = (struct sockaddr *)&src,
				   .ai_src_len = sizeof(src)};
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, &h2, &res), 0);
	assert_int_equal(res->ai_family, AF_INET);
	assert_int_equal(res->ai_src_len, sizeof(src));
	assert_memory_equal(res->ai_src_addr, &src, sizeof(src));
	assert_null(res->ai_dst_addr);
	assert_int_equal(res->ai_qp_type, IBV_QPT_RC);
	assert_int_equal(res->ai_port_space, RDMA_PS_TCP);
	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_bind_addr(id, res->ai_src_addr), 0);
	assert_non_null(id->verbs); /* IP_A is device 0's */
	/* and, as with librdmacm, the device's PD (UCX's rdmacm CM makes a QP on it) */
	assert_non_null(id->pd);
	assert_ptr_equal(id->pd->context, id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .cap = {2, 2, 1, 1, 0}};
	struct ibv_qp *qp = ibv_create_qp(id->pd, &qa);
	assert_non_null(qp);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(cq), 0);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_freeaddrinfo(res);
	struct rdma_addrinfo h3 = {.ai_port_space = RDMA_PS_UDP,
				   .ai_src_addr = (struct sockaddr *)&src,
				   .ai_src_len = sizeof(src),
				   .ai_dst_addr = (struct sockaddr *)&dst,
				   .ai_dst_len = sizeof(dst)};
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, &h3, &res), 0);
	assert_memory_equal(res->ai_src_addr, &src, sizeof(src));
	assert_memory_equal(res->ai_dst_addr, &dst, sizeof(dst));
	assert_int_equal(res->ai_qp_type, IBV_QPT_UD);
	rdma_freeaddrinfo(res);
	/* A name still wins over the hints' destination; the hints' source is kept. */
	assert_int_equal(rdma_getaddrinfo(IP_A, "7483", &h3, &res), 0);
	assert_int_equal(ntohs(((struct sockaddr_in *)res->ai_dst_addr)->sin_port), 7483);
	assert_memory_equal(res->ai_src_addr, &src, sizeof(src));
	rdma_freeaddrinfo(res);
	errno = 0;
	assert_int_equal(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	assert_int_equal(errno, EINVAL);
}

/* Synchronous use, as the rdma_create_ep(3) examples do. */
static void *sync_server(void *arg)
{
	struct rdma_cm_id *listen = arg, *id;
	if (rdma_get_request(listen, &id))
		return (void *)1;
	struct ibv_qp_init_attr qa = cmt_qp_attr(IBV_QPT_RC);
	if (rdma_create_qp(id, NULL, &qa))
		return (void *)2;
	static uint8_t buf[64];
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, sizeof(buf));
	if (!mr || rdma_post_recv(id, NULL, buf, sizeof(buf), mr))
		return (void *)3;
	if (rdma_accept(id, NULL))
		return (void *)4;
	struct ibv_wc wc;
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
	    strcmp((char *)buf, "sync ping") != 0)
		return (void *)5;
	rdma_dereg_mr(mr);
	rdma_disconnect(id);
	rdma_destroy_ep(id);
	return NULL;
}

static void sync_endpoints(void **state)
{
	(void)state;
	struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP}, *res;
	struct rdma_cm_id *listen, *c;
	assert_int_equal(rdma_getaddrinfo(IP_A, "7476", &hints, &res), 0);
	assert_int_equal(rdma_create_ep(&listen, res, NULL, NULL), 0);
	rdma_freeaddrinfo(res);
	assert_int_equal(rdma_listen(listen, 1), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, sync_server, listen), 0);

	hints.ai_flags = 0;
	assert_int_equal(rdma_getaddrinfo(IP_A, "7476", &hints, &res), 0);
	struct ibv_qp_init_attr qa = cmt_qp_attr(IBV_QPT_RC);
	assert_int_equal(rdma_create_ep(&c, res, NULL, &qa), 0);
	rdma_freeaddrinfo(res);
	assert_int_equal(rdma_connect(c, NULL), 0);
	static char msg[64] = "sync ping";
	struct ibv_mr *mr = rdma_reg_msgs(c, msg, sizeof(msg));
	assert_int_equal(rdma_post_send(c, NULL, msg, sizeof(msg), mr, IBV_SEND_SIGNALED), 0);
	struct ibv_wc wc;
	assert_int_equal(rdma_get_send_comp(c, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	void *ret;
	pthread_join(t, &ret);
	assert_null(ret);
	rdma_dereg_mr(mr);
	rdma_disconnect(c);
	rdma_destroy_ep(c);
	rdma_destroy_ep(listen);
}

/* rdma_create_srq(3) and rdma_create_srq_ex: the id's SRQ on the PD asked
 * for, else the id's (the device's); the granted sizes written back; basic
 * and XRC SRQs. */
static void srq_of_id(void **state)
{
	(void)state;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	struct sockaddr_in a = tu_addr(IP_A, 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
	assert_non_null(id->verbs);

	struct ibv_srq_init_attr sa = {.srq_context = id, .attr = {.max_wr = 5, .max_sge = 1}};
	assert_int_equal(rdma_create_srq(id, NULL, &sa), 0);
	assert_non_null(id->srq);
	assert_non_null(id->pd); /* the device's, now the id's */
	assert_ptr_equal(id->srq->pd, id->pd);
	assert_ptr_equal(id->srq->srq_context, id);
	assert_true(sa.attr.max_wr >= 5);
	rdma_destroy_srq(id);
	assert_null(id->srq);

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	assert_non_null(pd);
	struct ibv_srq_init_attr_ex ex = {.attr = {.max_wr = 3, .max_sge = 1},
					  .comp_mask =
					      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = pd};
	/* an XRC SRQ without a domain or CQ: the device's domain and a receive
	 * CQ made for the id, which go with the SRQ */
	assert_int_equal(rdma_create_srq_ex(id, &ex), 0);
	assert_non_null(id->srq);
	assert_non_null(id->recv_cq);
	assert_ptr_equal(ex.cq, id->recv_cq);
	assert_non_null(ex.xrcd);
	uint32_t srqn = 0;
	assert_int_equal(ibv_get_srq_num(id->srq, &srqn), 0);
	rdma_destroy_srq(id);
	assert_null(id->srq);
	assert_null(id->recv_cq);
	ex.srq_type = IBV_SRQT_BASIC;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	assert_int_equal(rdma_create_srq_ex(id, &ex), 0);
	assert_ptr_equal(id->srq->pd, pd);
	assert_ptr_equal(id->pd, pd);
	assert_true(ex.attr.max_wr >= 3);
	rdma_destroy_srq(id);
	/* without IBV_SRQ_INIT_ATTR_PD the pd field is not read: the id's PD */
	ex = (struct ibv_srq_init_attr_ex){.attr = {.max_wr = 3, .max_sge = 1},
					   .pd = (struct ibv_pd *)&ex};
	assert_int_equal(rdma_create_srq_ex(id, &ex), 0);
	assert_ptr_equal(id->srq->pd, pd);
	rdma_destroy_srq(id);

	errno = 0;
	assert_int_equal(rdma_create_srq(id, NULL, NULL), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(rdma_create_srq_ex(NULL, &ex), -1);
	assert_int_equal(errno, EINVAL);
	id->pd = NULL;
	assert_int_equal(ibv_dealloc_pd(pd), 0);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    // clang-format off
	    cmocka_unit_test(unsupported_and_helpers),
	    cmocka_unit_test(loopback_bind_and_hint_addresses),
	    cmocka_unit_test(rc_one_device),
	    cmocka_unit_test(rc_two_devices),
	    cmocka_unit_test(rejected_by_listener),
	    cmocka_unit_test(rejected_no_listener),
	    cmocka_unit_test(ud_sidr),
	    cmocka_unit_test(sync_endpoints),
	    cmocka_unit_test(srq_of_id),
	    cmocka_unit_test(ece_two_devices),
	    cmocka_unit_test(unreachable_host),
	    cmocka_unit_test(rejected_no_listener), /* the GSI still answers after that */
	    // clang-format on
	};
	return cmt_run_two_devices("cm", IP_A, IP_B, tests, sizeof(tests) / sizeof(tests[0]));
}
