/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif's direct channel against a hostile or broken peer (port_memif_direct.c):
 * no real rocemu sends these, so the receive side is fed here from a peer
 * object in plain memory (md_test_util.h). Every bad descriptor is a counted
 * drop and never a read outside the area; a header out of bounds is refused;
 * ring indices no ring allows stop the view; frames that are not RoCE are
 * copied and their buffer given back at once, and so are small RoCE frames
 * (at most the copy limit); a wrapped frame's buffer goes back to the peer
 * when the mbuf is freed, also after the view was dropped. The sender's cap
 * on frames out leaves a quarter of the pool for receiving.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>
#include <rte_mbuf.h>

#include "../../emulator/port/port_internal.h"
#include "md_test_util.h"

static struct rte_mempool *hdr_pool, *copy_pool;

static int setup(void **state)
{
	(void)state;
	if (port_eal_init(false))
		return -1;
	hdr_pool = rte_pktmbuf_pool_create("mdt_hdr", 256, 0, 0, 0, SOCKET_ID_ANY);
	copy_pool = rte_pktmbuf_pool_create("mdt_copy", 256, 0, 0, 2048, SOCKET_ID_ANY);
	return hdr_pool && copy_pool ? 0 : -1;
}

/* A peer object in memory, our view of it, counters, frames taken. */
struct view {
	struct mdt_obj o;
	struct md_peer *p;
	uint64_t ctr[PC_COUNT];
	struct rte_mbuf *pkts[16];
	uint32_t *ret; /* the object's return ring */
};

static void view_open(struct view *v)
{
	memset(v, 0, sizeof(*v));
	mdt_obj_make(&v->o);
	v->ret = (uint32_t *)(v->o.sh->desc + MDT_RING);
	v->p = memif_direct_peer_from_memory(v->o.mem, v->o.len);
	assert_non_null(v->p);
}

/* Up to n frames into v->pkts from index at, every RoCE frame wrapped. */
static uint16_t view_rx(struct view *v, unsigned at, uint16_t n)
{
	return memif_direct_peer_rx(v->p, v->ctr, hdr_pool, copy_pool, 0, v->pkts + at, n);
}

/* The same, frames of at most copy_max bytes copied out. */
static uint16_t view_rx_copy(struct view *v, unsigned at, uint16_t n, uint32_t copy_max)
{
	return memif_direct_peer_rx(v->p, v->ctr, hdr_pool, copy_pool, copy_max, v->pkts + at, n);
}

/* Is this frame ours (a copy), not in the peer's object? */
static bool view_is_copy(const struct view *v, const struct rte_mbuf *m)
{
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);

	return d + m->data_len <= v->o.mem || d >= v->o.mem + v->o.len;
}

static void view_close(struct view *v)
{
	memif_direct_peer_drop(v->p);
	free(v->o.mem);
}

static void test_check_desc(void **state)
{
	uint8_t held[4] = {0, 1, 0, 0};
	struct md_desc d;

	(void)state;
	d = (struct md_desc){.index = 0, .off = 128, .len = 60};
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_OK);
	d.index = 4;
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_BAD_INDEX);
	d.index = UINT32_MAX;
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_BAD_INDEX);
	d = (struct md_desc){.index = 2, .off = 200, .len = 57}; /* ends at 257 */
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_BAD_RANGE);
	d = (struct md_desc){.index = 2, .off = 65535, .len = 65535};
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_BAD_RANGE);
	d = (struct md_desc){.index = 2, .off = 0, .len = 13}; /* a runt */
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_BAD_RANGE);
	d = (struct md_desc){.index = 1, .off = 0, .len = 60};
	assert_int_equal(memif_direct_check_desc(&d, 4, 256, held), MD_HELD);
}

static void test_header_refused(void **state)
{
	struct mdt_obj o;
	struct md_peer *p;

	(void)state;
	mdt_obj_make(&o);
	p = memif_direct_peer_from_memory(o.mem, o.len);
	assert_non_null(p);
	memif_direct_peer_drop(p);
	assert_null(memif_direct_peer_from_memory(o.mem, o.len - 1)); /* area past the end */
	o.sh->ring_size = 24;					      /* not a power of two */
	assert_null(memif_direct_peer_from_memory(o.mem, o.len));
	o.sh->ring_size = 8; /* fewer slots than buffers */
	assert_null(memif_direct_peer_from_memory(o.mem, o.len));
	o.sh->ring_size = MDT_RING;
	o.sh->data_len = 1ull << 40; /* says more than n * elt */
	assert_null(memif_direct_peer_from_memory(o.mem, o.len));
	o.sh->data_len = (uint64_t)MDT_N * MDT_ELT;
	o.sh->data_off = 100; /* not page aligned, inside the rings */
	assert_null(memif_direct_peer_from_memory(o.mem, o.len));
	o.sh->data_off = o.data_off;
	o.sh->magic = 0;
	assert_null(memif_direct_peer_from_memory(o.mem, o.len));
	free(o.mem);
}

static void test_bad_descriptors(void **state)
{
	struct view v;
	uint16_t n;

	(void)state;
	view_open(&v);
	mdt_roce_frame(&v.o, 3, 128, 100);
	memset(v.o.area + 5 * MDT_ELT, 0xff, 60); /* broadcast, type 0xffff: not RoCE */
	mdt_post(&v.o, MDT_N, 128, 100);	  /* index past the area */
	mdt_post(&v.o, UINT32_MAX, 0, 100);	  /* the same, far */
	mdt_post(&v.o, 3, 450, 100);		  /* beyond the buffer's end */
	mdt_post(&v.o, 3, 128, 0);		  /* empty */
	mdt_post(&v.o, 3, 128, 100);		  /* good: wrapped */
	mdt_post(&v.o, 3, 128, 100);		  /* the same buffer again while we hold it */
	mdt_post(&v.o, 5, 0, 60);		  /* not RoCE: copied, given back at once */
	n = view_rx(&v, 0, 16);
	assert_int_equal(n, 2);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BAD_DESC], 4);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BUFFER_HELD], 1);
	assert_int_equal(v.ctr[PC_RX_DROPS], 5);
	assert_int_equal(v.ctr[PC_DIRECT_RX_BYTES], 100);
	assert_int_equal(v.ctr[PC_DIRECT_COPY_RX_BYTES], 60);
	assert_int_equal(v.ctr[PC_DIRECT_SMALL_RX_BYTES], 0); /* not RoCE */
	/* the wrapped frame is the peer's bytes, in place */
	assert_ptr_equal(rte_pktmbuf_mtod(v.pkts[0], uint8_t *), v.o.area + 3 * MDT_ELT + 128);
	assert_int_equal(v.pkts[0]->pkt_len, 100);
	assert_int_equal(rte_pktmbuf_mtod(v.pkts[0], uint8_t *)[50], (uint8_t)(50 * 7 + 3));
	/* the copy is ours, and buffer 5 went back already */
	assert_true(rte_pktmbuf_mtod(v.pkts[1], uint8_t *) < v.o.mem ||
		    rte_pktmbuf_mtod(v.pkts[1], uint8_t *) >= v.o.mem + v.o.len);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 1);
	assert_int_equal(v.ret[0], 5);
	rte_pktmbuf_free(v.pkts[1]);
	/* buffer 3 goes back once its mbuf is freed, at the next pass */
	rte_pktmbuf_free(v.pkts[0]);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 1);
	memif_direct_peer_return(v.p);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 2);
	assert_int_equal(v.ret[1], 3);
	/* and may be sent again */
	mdt_post(&v.o, 3, 128, 100);
	n = view_rx(&v, 0, 16);
	assert_int_equal(n, 1);
	/* a view dropped while one of its frames is out: the frame stays
	 * readable, its buffer is not returned, the view goes with it */
	memif_direct_peer_drop(v.p);
	assert_int_equal(rte_pktmbuf_mtod(v.pkts[0], uint8_t *)[50], (uint8_t)(50 * 7 + 3));
	rte_pktmbuf_free(v.pkts[0]);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 2);
	free(v.o.mem);
}

/* A producer index no ring of this size allows: nothing read, counted once,
 * the view stops. */
static void test_bad_ring(void **state)
{
	struct view v;

	(void)state;
	view_open(&v);
	mdt_roce_frame(&v.o, 0, 0, 100);
	atomic_store(&v.o.sh->desc_prod, MDT_RING + 1);
	assert_int_equal(view_rx(&v, 0, 16), 0);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BAD_RING], 1);
	atomic_store(&v.o.sh->desc_prod, 1);
	assert_int_equal(view_rx(&v, 0, 16), 0);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BAD_RING], 1);
	view_close(&v);
}

/* More descriptors than the burst: the rest wait for the next one. */
static void test_burst_limit(void **state)
{
	struct view v;

	(void)state;
	view_open(&v);
	for (uint32_t i = 0; i < 6; i++) {
		mdt_roce_frame(&v.o, i, 64, 200);
		mdt_post(&v.o, i, 64, 200);
	}
	assert_int_equal(view_rx(&v, 0, 4), 4);
	assert_int_equal(view_rx(&v, 4, 4), 2);
	assert_int_equal(v.ctr[PC_RX_DROPS], 0);
	for (int i = 0; i < 6; i++) {
		assert_ptr_equal(rte_pktmbuf_mtod(v.pkts[i], uint8_t *),
				 v.o.area + i * MDT_ELT + 64);
		rte_pktmbuf_free(v.pkts[i]);
	}
	memif_direct_peer_return(v.p);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 6);
	view_close(&v);
}

static void test_is_roce(void **state)
{
	struct mdt_obj o;
	uint8_t *f;

	(void)state;
	mdt_obj_make(&o);
	mdt_roce_frame(&o, 0, 0, 100);
	f = o.area;
	assert_true(memif_direct_is_roce(f, 100));
	assert_false(memif_direct_is_roce(f, 14 + 40 + 7)); /* too short to tell */
	f[14] = 0x46;					    /* IPv4 options */
	assert_false(memif_direct_is_roce(f, 100));
	f[14] = 0x45;
	f[14 + 20 + 3] = 0; /* another UDP port */
	assert_false(memif_direct_is_roce(f, 100));
	free(o.mem);
}

/* Small RoCE frames (at most copy_max bytes) are copied out of the peer's
 * buffer and the buffer goes back in the same burst, before any mbuf is
 * freed; larger ones are still wrapped in place. A buffer given back may be
 * sent again at once, and what the peer then writes into it does not reach
 * the copy. A buffer named twice in one burst is taken once. */
static void test_small_frames_copied_out(void **state)
{
	struct view v;
	uint16_t n;

	(void)state;
	view_open(&v);
	mdt_roce_frame(&v.o, 2, 128, 100);
	mdt_roce_frame(&v.o, 4, 64, 300);
	mdt_roce_frame(&v.o, 6, 0, 256);
	mdt_post(&v.o, 2, 128, 100); /* copied */
	mdt_post(&v.o, 4, 64, 300);  /* over the limit: wrapped */
	mdt_post(&v.o, 6, 0, 256);   /* at the limit: copied */
	mdt_post(&v.o, 6, 0, 256);   /* the same buffer again in this burst */
	n = view_rx_copy(&v, 0, 16, 256);
	assert_int_equal(n, 3);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BUFFER_HELD], 1);
	assert_int_equal(v.ctr[PC_DIRECT_COPY_RX_BYTES], 100 + 256);
	assert_int_equal(v.ctr[PC_DIRECT_SMALL_RX_BYTES], 100 + 256); /* both RoCE */
	assert_int_equal(v.ctr[PC_DIRECT_RX_BYTES], 300);
	assert_true(view_is_copy(&v, v.pkts[0]));
	assert_false(view_is_copy(&v, v.pkts[1]));
	assert_ptr_equal(rte_pktmbuf_mtod(v.pkts[1], uint8_t *), v.o.area + 4 * MDT_ELT + 64);
	assert_true(view_is_copy(&v, v.pkts[2]));
	assert_int_equal(v.pkts[0]->pkt_len, 100);
	assert_int_equal(v.pkts[2]->pkt_len, 256);
	assert_memory_equal(rte_pktmbuf_mtod(v.pkts[0], uint8_t *), v.o.area + 2 * MDT_ELT + 128,
			    100);
	/* both copied buffers are back already, in order, each once; the
	 * wrapped one is not */
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 2);
	assert_int_equal(v.ret[0], 2);
	assert_int_equal(v.ret[1], 6);
	/* the peer reuses buffer 2 at once: accepted, and the first copy keeps
	 * the bytes it had */
	mdt_roce_frame(&v.o, 2, 128, 100);
	memset(v.o.area + 2 * MDT_ELT + 128 + 60, 0xee, 40);
	mdt_post(&v.o, 2, 128, 100);
	n = view_rx_copy(&v, 3, 1, 256);
	assert_int_equal(n, 1);
	assert_int_equal(v.ctr[PC_DROP_DIRECT_BUFFER_HELD], 1);
	assert_int_equal(rte_pktmbuf_mtod(v.pkts[3], uint8_t *)[70], 0xee);
	assert_int_equal(rte_pktmbuf_mtod(v.pkts[0], uint8_t *)[70], (uint8_t)(70 * 7 + 2));
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 3);
	/* freeing the copies gives nothing back twice; the wrapped frame's
	 * buffer goes back at the next pass */
	rte_pktmbuf_free(v.pkts[0]);
	rte_pktmbuf_free(v.pkts[2]);
	rte_pktmbuf_free(v.pkts[3]);
	rte_pktmbuf_free(v.pkts[1]);
	memif_direct_peer_return(v.p);
	assert_int_equal(atomic_load(&v.o.sh->ret_prod), 4);
	assert_int_equal(v.ret[3], 4);
	assert_int_equal(v.ctr[PC_RX_DROPS], 1);
	view_close(&v);
}

/* Frames out to the peer at most: three quarters of the pool, so that ACKs
 * can still be received when a sender with many QPs fills the channel;
 * ROCEMU_MEMIF_DIRECT_TX_CAP within 1..n, else ignored. */
static void test_tx_cap(void **state)
{
	(void)state;
	unsetenv("ROCEMU_MEMIF_DIRECT_TX_CAP");
	assert_int_equal(memif_direct_tx_cap(9929), 9929 - 2482);
	assert_int_equal(memif_direct_tx_cap(8192), 6144);
	assert_int_equal(memif_direct_tx_cap(512), 384);
	setenv("ROCEMU_MEMIF_DIRECT_TX_CAP", "1000", 1);
	assert_int_equal(memif_direct_tx_cap(8192), 1000);
	assert_int_equal(memif_direct_tx_cap(512), 512); /* never past the pool */
	setenv("ROCEMU_MEMIF_DIRECT_TX_CAP", "0", 1);
	assert_int_equal(memif_direct_tx_cap(8192), 6144);
	setenv("ROCEMU_MEMIF_DIRECT_TX_CAP", "12x", 1);
	assert_int_equal(memif_direct_tx_cap(8192), 6144);
	unsetenv("ROCEMU_MEMIF_DIRECT_TX_CAP");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_desc),
	    cmocka_unit_test(test_header_refused),
	    cmocka_unit_test(test_bad_descriptors),
	    cmocka_unit_test(test_bad_ring),
	    cmocka_unit_test(test_burst_limit),
	    cmocka_unit_test(test_is_roce),
	    cmocka_unit_test(test_small_frames_copied_out),
	    cmocka_unit_test(test_tx_cap),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
