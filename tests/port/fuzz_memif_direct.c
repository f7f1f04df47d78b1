/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target over the receive side of memif's direct channel
 * (port_memif_direct.c): what a hostile peer controls, its descriptors, its
 * ring index and the bytes of its buffers, against a peer object in plain
 * memory (md_test_util.h: 16 buffers of 512 bytes, rings of 16).
 *
 * Input: [prod_skip:1][n_desc:1][desc:8 * n_desc][frame bytes...]: the
 * producer index is advanced by prod_skip beyond the descriptors written
 * (a ring index out of range when large), prod_skip's low 3 bits times 64
 * are the copy limit (0: every RoCE frame wrapped; up to 448: small frames
 * copied out), the descriptors are taken as they are, the rest of the input
 * fills the buffers from the start of the area.
 * After each burst: every frame handed up lies inside its buffer or is a
 * copy of ours; once the frames are freed, every index in the return ring
 * is a buffer's, given back no more often than the peer sent it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf.h>

#include "../../emulator/port/port_internal.h"
#include "md_test_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rte_mempool *hdr_pool, *copy_pool;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (port_eal_init(false))
		abort();
	hdr_pool = rte_pktmbuf_pool_create("fmd_hdr", 256, 0, 0, 0, SOCKET_ID_ANY);
	copy_pool = rte_pktmbuf_pool_create("fmd_copy", 256, 0, 0, 2048, SOCKET_ID_ANY);
	if (!hdr_pool || !copy_pool)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t ctr[PC_COUNT] = {0};
	struct rte_mbuf *pkts[32];
	uint8_t seen[MDT_N] = {0}, sent[MDT_N] = {0};
	struct mdt_obj o;
	struct md_peer *p;
	unsigned skip, nd, got;
	uint32_t *ret;

	if (!hdr_pool)
		LLVMFuzzerInitialize(NULL, NULL);
	if (size < 2)
		return 0;
	skip = data[0];
	nd = data[1] % (MDT_RING + 1);
	data += 2;
	size -= 2;
	if (size < (size_t)nd * 8)
		return 0;
	mdt_obj_make(&o);
	ret = (uint32_t *)(o.sh->desc + MDT_RING);
	memcpy(o.sh->desc, data, (size_t)nd * 8);
	for (unsigned i = 0; i < nd; i++)
		if (o.sh->desc[i].index < MDT_N)
			sent[o.sh->desc[i].index]++;
	data += (size_t)nd * 8;
	size -= (size_t)nd * 8;
	memcpy(o.area, data, size < MDT_N * MDT_ELT ? size : MDT_N * MDT_ELT);
	p = memif_direct_peer_from_memory(o.mem, o.len);
	if (!p)
		abort();
	atomic_store(&o.sh->desc_prod, nd + (skip > 200 ? skip : 0));
	got = memif_direct_peer_rx(p, ctr, hdr_pool, copy_pool, (skip & 7u) * 64u, pkts, 32);
	for (unsigned i = 0; i < got; i++) {
		const uint8_t *d = rte_pktmbuf_mtod(pkts[i], const uint8_t *);

		const uint8_t *end = o.area + MDT_N * MDT_ELT;

		if (d >= o.area && d < end) { /* a wrapped frame: inside its buffer */
			if ((size_t)(d - o.area) % MDT_ELT + pkts[i]->data_len > MDT_ELT)
				abort();
		} else if (d + pkts[i]->data_len > o.mem && d < end) { /* a copy: ours */
			abort();
		}
		rte_pktmbuf_free(pkts[i]);
	}
	memif_direct_peer_return(p);
	for (unsigned i = 0; i < atomic_load(&o.sh->ret_prod); i++) {
		if (ret[i] >= MDT_N || ++seen[ret[i]] > sent[ret[i]])
			abort();
	}
	memif_direct_peer_drop(p);
	free(o.mem);
	return 0;
}
