/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * machine_probe: which mode is this 2-CPU VM in right now? A few tens of
 * milliseconds of three measures that the bench records beside every run
 * (bench/perf_bench.py) and that bench/perf_analysis.md "64 KiB bandwidth"
 * reads against rocemu's rate:
 *
 * - line_rtt_ns: one cache line bounced between a thread on CPU A and one on
 *   CPU B (each waits for the other's store, then stores): the median of
 *   several batches' 10th percentile chunk of 32 round trips (CHUNK_Q).
 *   Every line of a frame on memif's direct channel crosses between the
 *   two CPUs the same way.
 * - copy_GBps: one thread copies 64 KiB into a private buffer (memcpy, both
 *   in L2), the best of a few batches: the CPU's own speed.
 * - xfer_GBps: a producer on CPU A copies 4 KiB frames into a ring of 16
 *   buffers, a consumer on CPU B copies each out and gives it back: the shape
 *   of the direct channel without rocemu (no CRC, no descriptors), median of
 *   the batches' 90th percentile chunk rates of 16 frames.
 *
 *   machine_probe [-a CPU] [-b CPU] [-m MS] [--json]
 *
 * Defaults: CPUs 0 and 1 (the bench's client and server), about 40 ms in
 * all and never more than 4x that (past it, what was not measured is left
 * out; a measure with nothing prints -1). Exit 2 when a CPU is not ours.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE	   64
#define BATCHES	   7
#define COPY_LEN   (64 * 1024)
#define FRAME_LEN  4096
#define RING_SLOTS 16

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/*
 * The whole probe ends by this time (4x what it asks for): on a loaded
 * machine a thread may wait milliseconds for its CPU, and what was not
 * measured by then is left out (-1 when nothing was).
 */
static uint64_t deadline_ns;

/* Called in a spin loop: true, now and then, once the deadline has passed. */
static inline bool past_deadline(unsigned *spins)
{
	return ++*spins % 4096 == 0 && now_ns() > deadline_ns;
}

static int pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The q-quantile (0..1) of the values >= 0 among v[0..n) (reordered), -1 if none. */
static double quantile_of(double *v, int n, double q)
{
	int i, k = 0;

	for (i = 0; i < n; i++)
		if (v[i] >= 0)
			v[k++] = v[i];
	if (k == 0)
		return -1;
	qsort(v, (size_t)k, sizeof(*v), compare_double);
	return v[(int)(q * (k - 1) + 0.5)];
}

/* ------------------------------------------------------------------------ */
/* The peer thread: runs one measure's B side, on CPU B.                    */

enum peer_job { JOB_PINGPONG, JOB_CONSUME };

struct shared {
	/* the bounced line: A stores odd values, B answers with the next even one */
	_Alignas(LINE) volatile uint64_t ball;
	_Alignas(LINE) volatile int stop; /* A tells B the batch is over */
	_Alignas(LINE) volatile uint32_t slot_full[RING_SLOTS];
	enum peer_job job;
	int cpu_b;
	int pin_err;
	uint8_t *ring;	  /* RING_SLOTS frames, written by A, read by B */
	uint8_t *b_frame; /* B's private destination */
};

/* Wait until *p == want or the batch is stopped or stalled; true if seen. */
static bool wait_u64(volatile uint64_t *p, uint64_t want, volatile int *stop)
{
	unsigned spins = 0;

	while (*p != want) {
		if (*stop || past_deadline(&spins))
			return false;
		cpu_relax();
	}
	return true;
}

static void peer_pingpong(struct shared *s)
{
	uint64_t v = 1;

	while (wait_u64(&s->ball, v, &s->stop)) {
		s->ball = v + 1;
		v += 2;
	}
}

static void peer_consume(struct shared *s)
{
	unsigned i = 0, spins = 0;

	while (!s->stop) {
		if (!__atomic_load_n(&s->slot_full[i], __ATOMIC_ACQUIRE)) {
			if (past_deadline(&spins))
				return;
			cpu_relax();
			continue;
		}
		memcpy(s->b_frame, s->ring + (size_t)i * FRAME_LEN, FRAME_LEN);
		__atomic_store_n(&s->slot_full[i], 0, __ATOMIC_RELEASE);
		i = (i + 1) % RING_SLOTS;
	}
}

static void *peer_main(void *arg)
{
	struct shared *s = arg;

	s->pin_err = pin_self(s->cpu_b);
	if (s->pin_err != 0)
		return NULL;
	if (s->job == JOB_PINGPONG)
		peer_pingpong(s);
	else
		peer_consume(s);
	return NULL;
}

/* Run one batch of a measure with its peer on CPU B; fn is A's side. */
static double with_peer(struct shared *s, enum peer_job job,
			double (*fn)(struct shared *, uint64_t), uint64_t batch_ns)
{
	pthread_t t;
	double r;

	s->job = job;
	s->stop = 0;
	s->ball = 0;
	memset((void *)s->slot_full, 0, sizeof(s->slot_full));
	if (pthread_create(&t, NULL, peer_main, s) != 0)
		return -1;
	r = fn(s, batch_ns);
	s->stop = 1;
	pthread_join(t, NULL);
	return s->pin_err != 0 ? -1 : r;
}

/*
 * The batches time chunks of work and keep the fastest tenth's boundary
 * (CHUNK_Q): on a shared machine a chunk in which either thread lost its CPU
 * is an outlier of up to milliseconds, and at load 7 that is half of them;
 * the 10th percentile is the hardware as long as one chunk in ten ran with
 * both threads on their CPUs.
 */
#define CHUNK_Q		 0.1
#define CHUNKS_MAX	 8192
#define RTT_PER_CHUNK	 32
#define FRAMES_PER_CHUNK 16

static double chunk[CHUNKS_MAX];

/* A's side of the ping-pong: ns per round trip, the batch's CHUNK_Q chunk. */
static double pingpong_batch(struct shared *s, uint64_t batch_ns)
{
	uint64_t v = 1, t0, t1, start;
	int n = 0;

	/* the first exchange only starts B's thread */
	s->ball = v;
	if (!wait_u64(&s->ball, v + 1, &s->stop))
		return -1;
	v += 2;
	start = t0 = now_ns();
	do {
		for (int i = 0; i < RTT_PER_CHUNK; i++) {
			s->ball = v;
			if (!wait_u64(&s->ball, v + 1, &s->stop))
				return quantile_of(chunk, n, CHUNK_Q); /* the deadline */
			v += 2;
		}
		t1 = now_ns();
		chunk[n++] = (double)(t1 - t0) / RTT_PER_CHUNK;
		t0 = t1;
	} while (t1 - start < batch_ns && n < CHUNKS_MAX);
	return quantile_of(chunk, n, CHUNK_Q);
}

/* Wait until slot i is empty (the consumer took its frame); false if stalled. */
static bool wait_slot_empty(struct shared *s, unsigned i)
{
	unsigned spins = 0;

	while (__atomic_load_n(&s->slot_full[i], __ATOMIC_ACQUIRE)) {
		if (past_deadline(&spins))
			return false;
		cpu_relax();
	}
	return true;
}

/* A's side of the transfer: producer, GB/s, the batch's CHUNK_Q chunk from the fastest. */
static double produce_batch(struct shared *s, uint64_t batch_ns)
{
	static uint8_t src[FRAME_LEN] __attribute__((aligned(LINE)));
	uint64_t t0, t1, start;
	unsigned i = 0;
	int n = 0;

	memset(src, 0x5A, sizeof(src));
	start = t0 = now_ns();
	do {
		for (int f = 0; f < FRAMES_PER_CHUNK; f++) {
			if (!wait_slot_empty(s, i))
				return quantile_of(chunk, n, 1 - CHUNK_Q); /* the deadline */
			memcpy(s->ring + (size_t)i * FRAME_LEN, src, FRAME_LEN);
			__atomic_store_n(&s->slot_full[i], 1, __ATOMIC_RELEASE);
			i = (i + 1) % RING_SLOTS;
		}
		t1 = now_ns();
		chunk[n++] = (double)FRAMES_PER_CHUNK * FRAME_LEN / (double)(t1 - t0);
		t0 = t1;
	} while (t1 - start < batch_ns && n < CHUNKS_MAX);
	return quantile_of(chunk, n, 1 - CHUNK_Q);
}

/* One thread, 64 KiB copies between two private buffers: best GB/s of the batches. */
static double copy_rate(uint64_t batch_ns)
{
	uint8_t *a = aligned_alloc(LINE, COPY_LEN), *b = aligned_alloc(LINE, COPY_LEN);
	double best = -1;

	if (a == NULL || b == NULL)
		goto out;
	memset(a, 1, COPY_LEN);
	memset(b, 2, COPY_LEN);
	for (int k = 0; k < BATCHES; k++) {
		uint64_t n = 0, t0 = now_ns(), t1;
		double r;

		do {
			for (int i = 0; i < 16; i++, n++)
				memcpy(n % 2 ? a : b, n % 2 ? b : a, COPY_LEN);
			t1 = now_ns();
		} while (t1 - t0 < batch_ns);
		r = (double)n * COPY_LEN / (double)(t1 - t0);
		if (k > 0 && t1 > deadline_ns)
			break;
		if (r > best)
			best = r;
	}
out:
	free(a);
	free(b);
	return best;
}

static void usage(void)
{
	fprintf(stderr, "usage: machine_probe [-a CPU] [-b CPU] [-m MS] [--json]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int cpu_a = 0, cpu_b = 1, ms = 40;
	bool json = false;
	double rtt[BATCHES], xfer[BATCHES], copy, line_rtt, xfer_rate;
	uint64_t batch_ns;
	struct shared *s;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (i + 1 < argc && strcmp(argv[i], "-a") == 0)
			cpu_a = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "-b") == 0)
			cpu_b = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "-m") == 0)
			ms = atoi(argv[++i]);
		else
			usage();
	}
	if (ms < 3 || cpu_a < 0 || cpu_b < 0 || cpu_a == cpu_b)
		usage();
	if (pin_self(cpu_a) != 0) {
		fprintf(stderr, "machine_probe: cannot run on CPU %d\n", cpu_a);
		return 2;
	}
	/* a third of the time each, in BATCHES batches */
	batch_ns = (uint64_t)ms * 1000000ull / 3 / BATCHES;
	s = aligned_alloc(LINE, sizeof(*s));
	if (s == NULL)
		return 1;
	memset(s, 0, sizeof(*s));
	s->cpu_b = cpu_b;
	s->ring = aligned_alloc(LINE, (size_t)RING_SLOTS * FRAME_LEN);
	s->b_frame = aligned_alloc(LINE, FRAME_LEN);
	if (s->ring == NULL || s->b_frame == NULL)
		return 1;
	memset(s->ring, 0, (size_t)RING_SLOTS * FRAME_LEN);
	deadline_ns = now_ns() + 4ull * (uint64_t)ms * 1000000ull;
	for (int k = 0; k < BATCHES; k++)
		rtt[k] = xfer[k] = -1;
	for (int k = 0; k < BATCHES && now_ns() < deadline_ns; k++) {
		rtt[k] = with_peer(s, JOB_PINGPONG, pingpong_batch, batch_ns);
		xfer[k] = with_peer(s, JOB_CONSUME, produce_batch, batch_ns);
		if (s->pin_err != 0) {
			fprintf(stderr, "machine_probe: cannot run on CPU %d\n", cpu_b);
			return 2;
		}
	}
	copy = copy_rate(batch_ns);
	line_rtt = quantile_of(rtt, BATCHES, 0.5);
	xfer_rate = quantile_of(xfer, BATCHES, 0.5);
	if (json)
		printf("{\"line_rtt_ns\": %.1f, \"copy_GBps\": %.2f, \"xfer_GBps\": %.2f, "
		       "\"cpus\": [%d, %d]}\n",
		       line_rtt, copy, xfer_rate, cpu_a, cpu_b);
	else
		printf("line_rtt_ns %.1f copy_GBps %.2f xfer_GBps %.2f cpus %d,%d\n", line_rtt,
		       copy, xfer_rate, cpu_a, cpu_b);
	free(s->ring);
	free(s->b_frame);
	free(s);
	return 0;
}
