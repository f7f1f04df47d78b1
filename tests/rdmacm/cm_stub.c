/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for device.c: see cm_stub.h. */
#include <errno.h>
#include <string.h>

#include "cm_peer.h"
#include "cm_stub.h"

pthread_mutex_t cma_lock = PTHREAD_MUTEX_INITIALIZER;

struct stub_sent stub_sent[STUB_SENT_MAX];
unsigned stub_n_sent;
uint64_t stub_now_ns = 1000000000ull;

static struct cma_device stub_dev;
static bool stub_ready;

void stub_gid_v4(union ibv_gid *g, uint8_t last)
{
	cm_peer_gid(g->raw, last);
}

void stub_grh_v4(uint8_t *grh, uint8_t last)
{
	memset(grh, 0, 40);
	grh[20] = 0x45; /* IPv4 header in the last 20 bytes */
	grh[20 + 12] = 10;
	grh[20 + 15] = last;
	grh[20 + 16] = 10;
	grh[20 + 19] = 1;
}

int cma_init(void)
{
	if (!stub_ready) {
		stub_dev.verbs = NULL;
		stub_dev.guid = 0x0102030405060708ull;
		stub_dev.active_mtu = IBV_MTU_1024;
		stub_dev.gid_len = 2;
		/* index 0: the link-local GID, index 1: 10.0.0.1 */
		stub_dev.gids[0].raw[0] = 0xfe;
		stub_dev.gids[0].raw[1] = 0x80;
		stub_dev.gids[0].raw[15] = 1;
		stub_gid_v4(&stub_dev.gids[1], 1);
		stub_dev.max_rd_atom = 16;
		stub_dev.rate = IBV_RATE_10_GBPS;
		stub_ready = true;
	}
	return 0;
}

struct cma_device *cma_devices(int *n)
{
	*n = stub_ready ? 1 : 0;
	return &stub_dev;
}

struct cma_device *cma_device_of(struct ibv_context *verbs)
{
	return stub_ready && verbs == stub_dev.verbs ? &stub_dev : NULL;
}

int cma_gsi_send(struct cma_device *d, int sgid_index, const union ibv_gid *dgid, uint8_t tclass,
		 uint8_t sl, const uint8_t *mad)
{
	if (d != &stub_dev || sgid_index < 0 || sgid_index >= d->gid_len)
		return -EINVAL;
	if (stub_n_sent < STUB_SENT_MAX) {
		memcpy(stub_sent[stub_n_sent].mad, mad, CM_MAD_SIZE);
		stub_sent[stub_n_sent].dgid = *dgid;
		stub_sent[stub_n_sent].tclass = tclass;
		stub_sent[stub_n_sent].sl = sl;
	}
	stub_n_sent++;
	return 0;
}

uint64_t cma_now_ns(void)
{
	return stub_now_ns;
}

unsigned stub_queued;

unsigned cma_qp_queued(struct ibv_context *verbs, uint32_t qpn)
{
	(void)verbs;
	(void)qpn;
	return stub_queued;
}

void stub_reset_sent(void)
{
	stub_n_sent = 0;
}

void stub_rx(const uint8_t *grh, const uint8_t *mad)
{
	pthread_mutex_lock(&cma_lock);
	cma_handle_mad(&stub_dev, grh, mad);
	pthread_mutex_unlock(&cma_lock);
}

void stub_advance(uint64_t ns)
{
	pthread_mutex_lock(&cma_lock);
	stub_now_ns += ns;
	cma_run_timers(stub_now_ns);
	pthread_mutex_unlock(&cma_lock);
}
