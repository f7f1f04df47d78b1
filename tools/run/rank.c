/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu run under an MPI launcher: one command line for every rank.
 *
 *   mpirun -np 2 ... rocemu run --rank-port memif:/tmp/job.sock \
 *       --rank-ip 10.90.0.1/24 --capture /tmp/job-%r.pcap -- ./app
 *
 * The launcher's environment says which rank this process is (Open MPI,
 * PMIx, MPICH's Hydra, Slurm); the --rank-* options become the rank's own
 * port options: a memif link joins rank 0 (server) and rank 1 (client),
 * any other port spec is taken as is (one rank per host, e.g. af_packet on
 * each host's interface); rank r gets the address --rank-ip + r; "%r" in
 * --capture becomes the rank.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool env_uint(const char *name, unsigned *out)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return false;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end || x > 1000000)
		return false;
	*out = (unsigned)x;
	return true;
}

int run_job_rank(unsigned *rank, unsigned *size)
{
	static const char *const vars[][2] = {
	    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, /* Open MPI */
	    {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE"},	      /* PMIx launchers */
	    {"PMI_RANK", "PMI_SIZE"},			      /* MPICH Hydra, Intel MPI */
	    {"SLURM_PROCID", "SLURM_NTASKS"},		      /* srun */
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (env_uint(vars[i][0], rank)) {
			if (!env_uint(vars[i][1], size))
				*size = 0; /* unknown */
			return 0;
		}
	return -ENOENT;
}

static int need_rank(const char *opt, unsigned *rank, unsigned *size, char *err, size_t len)
{
	if (run_job_rank(rank, size) == 0)
		return 0;
	return fail(err, len,
		    "--%s: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, "
		    "PMI_RANK or SLURM_PROCID): start rocemu run from mpirun/srun",
		    opt);
}

static int rank_port(const char *val, char *out, size_t outlen, char *err, size_t len)
{
	unsigned rank, size;
	int rc = need_rank("rank-port", &rank, &size, err, len);

	if (rc < 0)
		return rc;
	if (strncmp(val, "memif:", 6)) {
		snprintf(out, outlen, "%s", val);
		return 0;
	}
	if (!strncmp(val, "memif:server:", 13) || !strncmp(val, "memif:client:", 13))
		return fail(err, len,
			    "--rank-port memif:SOCKET: the rank chooses server or client");
	if (rank > 1 || size > 2)
		return fail(
		    err, len,
		    "--rank-port memif: a memif link joins two ranks (this is rank %u of %u); "
		    "use af_packet ports for more",
		    rank, size);
	if ((size_t)snprintf(out, outlen, "memif:%s:%s", rank == 0 ? "server" : "client",
			     val + 6) >= outlen)
		return fail(err, len, "--rank-port: socket path too long");
	return 0;
}

static int rank_ip(const char *val, char *out, size_t outlen, char *err, size_t len)
{
	unsigned rank, size, prefix;
	char addr[INET_ADDRSTRLEN], end;
	struct in_addr a;
	int rc = need_rank("rank-ip", &rank, &size, err, len);

	if (rc < 0)
		return rc;
	if (sscanf(val, "%15[0-9.]/%u%c", addr, &prefix, &end) != 2 || prefix < 1 || prefix > 30 ||
	    inet_pton(AF_INET, addr, &a) != 1)
		return fail(err, len, "--rank-ip '%s': expected IPv4ADDR/PREFIX (prefix 1..30)",
			    val);
	uint32_t host = ntohl(a.s_addr), mask = ~0u << (32 - prefix);
	uint32_t mine = host + rank;
	/* rank r's address: the first one plus r, still a host of the same subnet */
	if ((mine & mask) != (host & mask) || (mine & ~mask) == ~mask)
		return fail(err, len, "--rank-ip %s: rank %u's address leaves the /%u subnet", val,
			    rank, prefix);
	a.s_addr = htonl(mine);
	inet_ntop(AF_INET, &a, addr, sizeof(addr));
	snprintf(out, outlen, "%s/%u", addr, prefix);
	return 0;
}

static int rank_capture(const char *val, char *out, size_t outlen, char *err, size_t len)
{
	unsigned rank, size;
	const char *p = strstr(val, "%r");
	int rc;

	if (!p) {
		snprintf(out, outlen, "%s", val);
		return 0;
	}
	if ((rc = need_rank("capture ...%r...", &rank, &size, err, len)) < 0)
		return rc;
	if ((size_t)snprintf(out, outlen, "%.*s%u%s", (int)(p - val), val, rank, p + 2) >= outlen)
		return fail(err, len, "--capture: path too long");
	return 0;
}

int run_rank_option(char *key, size_t keylen, const char *val, char *out, size_t outlen, char *err,
		    size_t errlen)
{
	if (!strcmp(key, "rank-port")) {
		snprintf(key, keylen, "port");
		return rank_port(val, out, outlen, err, errlen);
	}
	if (!strcmp(key, "rank-ip")) {
		snprintf(key, keylen, "ip");
		return rank_ip(val, out, outlen, err, errlen);
	}
	if (!strcmp(key, "capture"))
		return rank_capture(val, out, outlen, err, errlen);
	snprintf(out, outlen, "%s", val);
	return 0;
}
