/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counters: a fixed set for the hot path (indexed) and named drop counters
 * created on first use ("drop_<reason>"). Written under the engine lock;
 * readers may read without it (values may be a pass behind).
 */
#include <inttypes.h>
#include <string.h>

#include "port_internal.h"

static const char *const fixed_names[PC_FIXED_COUNT] = {
    [PC_RX_FRAMES] = "rx_frames",
    [PC_RX_BYTES] = "rx_bytes",
    [PC_TX_FRAMES] = "tx_frames",
    [PC_TX_BYTES] = "tx_bytes",
    [PC_RX_ROCE] = "rx_roce_frames",
    [PC_LOOPBACK_FRAMES] = "loopback_frames",
    [PC_RX_DROPS] = "rx_drops",
    [PC_TX_DROPS] = "tx_drops",
    [PC_ARP_RX] = "arp_rx",
    [PC_ARP_REQUESTS_TX] = "arp_requests_tx",
    [PC_ARP_REPLIES_TX] = "arp_replies_tx",
    [PC_ARP_RESOLVED] = "neigh_resolved",
    [PC_ARP_FAILED] = "neigh_failed",
    [PC_GARP_TX] = "gratuitous_arp_tx",
    [PC_ND_RX] = "nd_rx",
    [PC_ND_SOLICITS_TX] = "nd_solicits_tx",
    [PC_ND_ADVERTS_TX] = "nd_adverts_tx",
    [PC_ICMP_ECHO_RX] = "icmp_echo_requests_rx",
    [PC_ICMP_ECHO_REPLIES_TX] = "icmp_echo_replies_tx",
    [PC_PING_TX] = "ping_requests_tx",
    [PC_PING_REPLIES] = "ping_replies_rx",
    [PC_CAPTURE_FRAMES] = "capture_frames",
    [PC_CAPTURE_FILTERED] = "capture_filtered_out",
    [PC_CAPTURE_FILES] = "capture_files",
    [PC_CAPTURE_NOT_WRITTEN] = "capture_frames_not_written",
    [PC_LINK_CHANGES] = "link_changes",
};

static void count_named(struct rocemu_port *port, const char *key, const char *prefix)
{
	unsigned n = atomic_load_explicit(&port->dyn_n, memory_order_relaxed);
	struct port_counter_slot *slot;
	char name[PORT_COUNTER_NAME_MAX];

	for (unsigned i = 0; i < n; i++)
		if (port->dyn[i].key == key &&
		    !strncmp(port->dyn[i].name, prefix, strlen(prefix))) {
			port->dyn[i].value++;
			return;
		}
	snprintf(name, sizeof(name), "%s%s", prefix, key);
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(port->dyn[i].name, name)) {
			port->dyn[i].value++;
			return;
		}
	if (n == PORT_MAX_COUNTERS) {
		port->dyn[PORT_MAX_COUNTERS - 1].value++; /* "other" */
		return;
	}
	slot = &port->dyn[n];
	slot->key = key;
	snprintf(slot->name, sizeof(slot->name), "%s", n == PORT_MAX_COUNTERS - 1 ? "other" : name);
	slot->value = 1;
	atomic_store_explicit(&port->dyn_n, n + 1, memory_order_release);
}

void port_count_drop(struct rocemu_port *port, const char *reason)
{
	count_named(port, reason, "drop_");
}

void port_count_event(struct rocemu_port *port, const char *name)
{
	count_named(port, name, "");
}

void rocemu_port_count(struct rocemu_port *port, const char *reason)
{
	port_count_drop(port, reason);
}

unsigned rocemu_port_counters(const struct rocemu_port *port, struct rocemu_counter *out,
			      unsigned max)
{
	unsigned n =
	    atomic_load_explicit(&((struct rocemu_port *)port)->dyn_n, memory_order_acquire);
	unsigned total = PC_FIXED_COUNT + n, k = 0;

	for (unsigned i = 0; i < PC_FIXED_COUNT && k < max; i++, k++) {
		out[k].name = fixed_names[i];
		out[k].value = port->fixed[i];
	}
	for (unsigned i = 0; i < n && k < max; i++, k++) {
		out[k].name = port->dyn[i].name;
		out[k].value = port->dyn[i].value;
	}
	return total;
}

void rocemu_port_counters_print(const struct rocemu_port *port, FILE *f)
{
	struct rocemu_counter c[PC_FIXED_COUNT + PORT_MAX_COUNTERS];
	unsigned n = rocemu_port_counters(port, c, sizeof(c) / sizeof(c[0]));

	if (n > sizeof(c) / sizeof(c[0]))
		n = sizeof(c) / sizeof(c[0]);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%-28s %" PRIu64 "\n", c[i].name, c[i].value);
}
