/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An MPI job for rocemu's middleware tests (tests/middleware/mpi_pair.sh):
 * two ranks exchange messages of every size from 1 byte to 4 MiB (eager
 * and rendezvous protocols both), each byte checked on arrival and the
 * answer checked on return, then MPI_Allreduce sums a vector over the ranks
 * and every element is checked. Prints one line per rank and exits 0, or
 * says what differed and aborts the job.
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE   (1 << 20)
#define ROUNDS	   4
#define REDUCE_LEN 100000
#define TAG_PING   1
#define TAG_PONG   2

static int rank;

/* The byte at offset i of message (size, round, dir): no two messages alike. */
static uint8_t pattern(size_t size, int round, int dir, size_t i)
{
	uint64_t x =
	    (uint64_t)size * 2654435761u + (uint64_t)round * 40503u + (uint64_t)dir * 7u + i;
	x ^= x >> 13;
	x *= 0x5bd1e995u;
	return (uint8_t)(x ^ (x >> 15));
}

static void fill(uint8_t *buf, size_t size, int round, int dir)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = pattern(size, round, dir, i);
}

static void check(const uint8_t *buf, size_t size, int round, int dir)
{
	for (size_t i = 0; i < size; i++)
		if (buf[i] != pattern(size, round, dir, i)) {
			fprintf(stderr,
				"mpi_pingpong: rank %d: size %zu round %d: byte %zu is 0x%02x, "
				"expected 0x%02x\n",
				rank, size, round, i, buf[i], pattern(size, round, dir, i));
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
}

static unsigned long ping_pong(uint8_t *buf)
{
	unsigned long messages = 0;
	int peer = 1 - rank;

	for (size_t size = 1; size <= MAX_SIZE; size *= 4)
		for (int round = 0; round < ROUNDS; round++) {
			if (rank == 0) {
				fill(buf, size, round, 0);
				MPI_Send(buf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD);
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				check(buf, size, round, 1);
			} else {
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, TAG_PING, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				check(buf, size, round, 0);
				fill(buf, size, round, 1);
				MPI_Send(buf, (int)size, MPI_BYTE, peer, TAG_PONG, MPI_COMM_WORLD);
			}
			messages += 2;
		}
	return messages;
}

static void all_reduce(int size)
{
	int64_t *in = malloc(REDUCE_LEN * sizeof(*in)), *out = malloc(REDUCE_LEN * sizeof(*out));

	if (!in || !out)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (int64_t i = 0; i < REDUCE_LEN; i++)
		in[i] = (rank + 1) * 1000003 * (i + 1);
	MPI_Allreduce(in, out, REDUCE_LEN, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	/* sum over r of (r + 1): size (size + 1) / 2 */
	for (int64_t i = 0; i < REDUCE_LEN; i++) {
		int64_t want = (int64_t)size * (size + 1) / 2 * 1000003 * (i + 1);
		if (out[i] != want) {
			fprintf(stderr,
				"mpi_pingpong: rank %d: allreduce element %" PRId64 " is %" PRId64
				", expected %" PRId64 "\n",
				rank, i, out[i], want);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	free(in);
	free(out);
}

int main(int argc, char **argv)
{
	int size;
	uint8_t *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_pingpong: needs 2 ranks, got %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	buf = malloc(MAX_SIZE);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	unsigned long messages = ping_pong(buf);
	all_reduce(size);
	MPI_Barrier(MPI_COMM_WORLD);
	printf("mpi_pingpong: rank %d of %d: %lu messages of 1 B..%d MiB and an allreduce of "
	       "%d int64 checked\n",
	       rank, size, messages, MAX_SIZE >> 20, REDUCE_LEN);
	free(buf);
	MPI_Finalize();
	return 0;
}
