/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Random bits for the identifiers a peer must not guess or see repeat after
 * a restart: the first QPN, memory keys' variant bits. They come from the
 * kernel's CSPRNG (getrandom), never from the time or the pid.
 */
#ifndef ROCEMU_RANDOM_H
#define ROCEMU_RANDOM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>

/**
 * Fill buf with len random bytes: 0, or -errno (ENOSYS on a kernel older
 * than 3.17). Blocks only until the kernel's pool is seeded at boot.
 */
static inline int rocemu_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

#endif
