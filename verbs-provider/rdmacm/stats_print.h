/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The counters of rocemu's librdmacm (the CM's CMA_STATS, rsocket's
 * RS_STATS), as ROCEMU_STATS prints them at exit: one line a counter,
 * "rocemu: LAYER NAME VALUE"; with ROCEMU_STATS=1 the non-zero ones, with
 * ROCEMU_STATS=all every one.
 */
#ifndef ROCEMU_RDMACM_STATS_PRINT_H
#define ROCEMU_RDMACM_STATS_PRINT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The counters of one layer: the array `values` indexed by the layer's enum
 * (count of them), `values`_names made from the X-macro list, and name_fn(i),
 * the name of counter i or NULL past the last.
 */
#define RDMACM_STAT_NAME(n) #n,
#define RDMACM_STATS_DEFINE(list, values, count, name_fn)                                          \
	uint64_t values[count];                                                                    \
	static const char *const values##_names[count] = {list(RDMACM_STAT_NAME)};                 \
	const char *name_fn(unsigned i)                                                            \
	{                                                                                          \
		return i < count ? values##_names[i] : NULL;                                       \
	}

/* Nothing unless ROCEMU_STATS is set and not "0". values[i] is read once, as it is. */
static inline void rdmacm_stats_print(const char *layer, const char *const names[],
				      const uint64_t values[], unsigned n)
{
	const char *env = getenv("ROCEMU_STATS");
	int all;

	if (!env || !*env || !strcmp(env, "0"))
		return;
	all = !strcmp(env, "all"); /* zero counters too */
	for (unsigned i = 0; i < n; i++) {
		uint64_t v = __atomic_load_n(&values[i], __ATOMIC_RELAXED);

		if (v || all)
			fprintf(stderr, "rocemu: %s %s %llu\n", layer, names[i],
				(unsigned long long)v);
	}
}

#endif
