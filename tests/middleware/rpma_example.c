/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librpma's two first examples, as a user writes them against the installed
 * <librpma.h> (tests/middleware/rpma_pair.sh builds this in the test):
 *
 *   rpma_example server|client ADDR PORT connection|read
 *
 * connection: the client connects with private data, the server answers
 *             with its own, each checks the other's, the client disconnects
 *             and both see the connection closed (librpma's 01-connection);
 * read:       the server registers 1 MiB of a known pattern as a READ source
 *             and hands its descriptor over in the connection's private
 *             data; the client reads it all with one rpma_read into its own
 *             registered memory, waits for the completion and checks every
 *             byte (librpma's 02-read-to-volatile).
 * Exit 0 with one line saying what was checked, else the failing call.
 */
#include <librpma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_SIZE    (1 << 20)
#define CLIENT_HELLO "rocemu: hello from the rpma client"
#define SERVER_HELLO "rocemu: hello from the rpma server"

static const char *role;

#define CHECK(call)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_) {                                                                         \
			fprintf(stderr, "rpma_example %s: %s: %s\n", role, #call,                  \
				rpma_err_2str(rc_));                                               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t pattern(size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u;
	return (uint8_t)(x >> 24 ^ i);
}

static void expect_event(struct rpma_conn *conn, enum rpma_conn_event want)
{
	enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;

	CHECK(rpma_conn_next_event(conn, &ev));
	if (ev != want) {
		fprintf(stderr, "rpma_example %s: connection event %s, expected %s\n", role,
			rpma_utils_conn_event_2str(ev), rpma_utils_conn_event_2str(want));
		exit(1);
	}
}

static void expect_private(const void *got, size_t len, const void *want, size_t want_len,
			   const char *what)
{
	if (len < want_len || memcmp(got, want, want_len)) {
		fprintf(stderr, "rpma_example %s: %s: private data differs (%zu bytes)\n", role,
			what, len);
		exit(1);
	}
}

static int server(const char *addr, const char *port, bool read)
{
	struct ibv_context *ibv;
	struct rpma_peer *peer = NULL;
	struct rpma_ep *ep = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	struct rpma_mr_local *mr = NULL;
	struct rpma_conn_private_data pdata, theirs;
	uint8_t desc[256], *buf = NULL;
	size_t desc_size = 0;

	CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ibv));
	CHECK(rpma_peer_new(ibv, &peer));
	if (read) {
		buf = malloc(READ_SIZE);
		if (!buf)
			return 1;
		for (size_t i = 0; i < READ_SIZE; i++)
			buf[i] = pattern(i);
		CHECK(rpma_mr_reg(peer, buf, READ_SIZE, RPMA_MR_USAGE_READ_SRC, &mr));
		CHECK(rpma_mr_get_descriptor_size(mr, &desc_size));
		if (desc_size > sizeof(desc))
			return 1;
		CHECK(rpma_mr_get_descriptor(mr, desc));
		pdata.ptr = desc;
		pdata.len = (uint8_t)desc_size;
	} else {
		pdata.ptr = (void *)SERVER_HELLO;
		pdata.len = sizeof(SERVER_HELLO);
	}
	CHECK(rpma_ep_listen(peer, addr, port, &ep));
	CHECK(rpma_ep_next_conn_req(ep, NULL, &req));
	CHECK(rpma_conn_req_get_private_data(req, &theirs));
	expect_private(theirs.ptr, theirs.len, CLIENT_HELLO, sizeof(CLIENT_HELLO),
		       "the client's request");
	CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	/* the client reads (one-sided: nothing to do here) and disconnects */
	expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_disconnect(conn));
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_ep_shutdown(&ep));
	if (mr)
		CHECK(rpma_mr_dereg(&mr));
	CHECK(rpma_peer_delete(&peer));
	free(buf);
	printf("rpma_example server: %s done\n", read ? "read" : "connection");
	return 0;
}

static void read_all(struct rpma_peer *peer, struct rpma_conn *conn,
		     const struct rpma_conn_private_data *theirs)
{
	struct rpma_mr_remote *src = NULL;
	struct rpma_mr_local *dst = NULL;
	struct rpma_cq *cq = NULL;
	struct ibv_wc wc;
	size_t remote_size = 0;
	int got = 0;
	uint8_t *buf = calloc(1, READ_SIZE);

	if (!buf)
		exit(1);
	CHECK(rpma_mr_remote_from_descriptor(theirs->ptr, theirs->len, &src));
	CHECK(rpma_mr_remote_get_size(src, &remote_size));
	if (remote_size != READ_SIZE) {
		fprintf(stderr, "rpma_example client: remote region of %zu bytes\n", remote_size);
		exit(1);
	}
	CHECK(rpma_mr_reg(peer, buf, READ_SIZE, RPMA_MR_USAGE_READ_DST, &dst));
	CHECK(rpma_read(conn, dst, 0, src, 0, READ_SIZE, RPMA_F_COMPLETION_ALWAYS, buf));
	CHECK(rpma_conn_get_cq(conn, &cq));
	CHECK(rpma_cq_wait(cq));
	CHECK(rpma_cq_get_wc(cq, 1, &wc, &got));
	if (got != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_READ ||
	    wc.wr_id != (uintptr_t)buf) {
		fprintf(stderr, "rpma_example client: completion: %d, status %s, opcode %d\n", got,
			ibv_wc_status_str(wc.status), wc.opcode);
		exit(1);
	}
	for (size_t i = 0; i < READ_SIZE; i++)
		if (buf[i] != pattern(i)) {
			fprintf(stderr,
				"rpma_example client: byte %zu read 0x%02x, expected 0x%02x\n", i,
				buf[i], pattern(i));
			exit(1);
		}
	CHECK(rpma_mr_dereg(&dst));
	CHECK(rpma_mr_remote_delete(&src));
	free(buf);
}

static int client(const char *addr, const char *port, bool read)
{
	struct ibv_context *ibv;
	struct rpma_peer *peer = NULL;
	struct rpma_conn_req *req = NULL;
	struct rpma_conn *conn = NULL;
	struct rpma_conn_private_data pdata = {(void *)CLIENT_HELLO, sizeof(CLIENT_HELLO)}, theirs;

	CHECK(rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ibv));
	CHECK(rpma_peer_new(ibv, &peer));
	CHECK(rpma_conn_req_new(peer, addr, port, NULL, &req));
	CHECK(rpma_conn_req_connect(&req, &pdata, &conn));
	expect_event(conn, RPMA_CONN_ESTABLISHED);
	CHECK(rpma_conn_get_private_data(conn, &theirs));
	if (read)
		read_all(peer, conn, &theirs);
	else
		expect_private(theirs.ptr, theirs.len, SERVER_HELLO, sizeof(SERVER_HELLO),
			       "the server's answer");
	CHECK(rpma_conn_disconnect(conn));
	expect_event(conn, RPMA_CONN_CLOSED);
	CHECK(rpma_conn_delete(&conn));
	CHECK(rpma_peer_delete(&peer));
	printf("rpma_example client: %s\n",
	       read ? "read 1 MiB, every byte checked" : "private data checked both ways");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (strcmp(argv[4], "connection") && strcmp(argv[4], "read"))) {
		fprintf(stderr, "usage: rpma_example server|client ADDR PORT connection|read\n");
		return 2;
	}
	role = argv[1];
	bool read = !strcmp(argv[4], "read");
	return !strcmp(role, "server") ? server(argv[2], argv[3], read)
				       : client(argv[2], argv[3], read);
}
