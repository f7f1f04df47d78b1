/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: one array indexed by enum port_counter, names from the one list
 * in port_counters.h. Written under the engine lock; readers may read
 * without it (values may be a pass behind).
 */
#include <inttypes.h>

#include "port_internal.h"

static const char *const counter_names[PC_COUNT] = {
#define PORT_COUNTER_NAME(e, n) [PC_##e] = #n,
    PORT_COUNTERS(PORT_COUNTER_NAME) PORT_EVENTS(PORT_COUNTER_NAME) PORT_DROPS(PORT_COUNTER_NAME)
#undef PORT_COUNTER_NAME
};

const char *rocemu_port_counter_name(enum port_counter c)
{
	return (unsigned)c < PC_COUNT ? counter_names[c] : NULL;
}

void rocemu_port_count(struct rocemu_port *port, enum port_counter c)
{
	if ((unsigned)c < PC_COUNT)
		port_count(port, c);
}

static unsigned list(const struct rocemu_port *port, struct rocemu_counter *out, unsigned max,
		     bool all)
{
	unsigned k = 0;

	for (unsigned i = 0; i < PC_COUNT; i++) {
		uint64_t v = port->ctr[i];

		if (!all && i >= PC_LISTED_COUNT && v == 0)
			continue;
		if (k < max) {
			out[k].name = counter_names[i];
			out[k].value = v;
		}
		k++;
	}
	return k;
}

unsigned rocemu_port_counters(const struct rocemu_port *port, struct rocemu_counter *out,
			      unsigned max)
{
	return list(port, out, max, false);
}

unsigned rocemu_port_counters_all(const struct rocemu_port *port, struct rocemu_counter *out,
				  unsigned max)
{
	return list(port, out, max, true);
}

void rocemu_port_counters_print(const struct rocemu_port *port, FILE *f)
{
	struct rocemu_counter c[PC_COUNT];
	unsigned n = rocemu_port_counters(port, c, PC_COUNT);

	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%-28s %" PRIu64 "\n", c[i].name, c[i].value);
}
