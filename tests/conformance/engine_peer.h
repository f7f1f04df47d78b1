/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rocemu engine and one raw peer port joined by a net_ring pair, both
 * with their progress threads stopped (the caller drives progress): the
 * set-up of the conformance runner and of the engine fuzzer. EAL must be up.
 */
#ifndef ROCEMU_TESTS_CONFORMANCE_ENGINE_PEER_H
#define ROCEMU_TESTS_CONFORMANCE_ENGINE_PEER_H

#include <stdio.h>

#include "../../emulator/transport/rocemu_engine.h"
#include "../port/port_test_util.h"

struct engine_peer {
	struct rocemu_engine *e;
	struct rocemu_port *eport, *pport; /* the engine's port, the peer's */
	uint8_t emac[6], pmac[6], egid[16], pgid[16];
	int egid_index; /* of egid in the engine's GID table */
};

/* Host 1 (the engine) or 2 (the peer): "ring:RING:a" or ":b", ip/24, MAC
 * 02:00:00:NN:00:0H (NN = mac_byte in hex, H = host). */
static inline int engine_peer_config(struct rocemu_port_config *cfg, const char *ring, int host,
				     const char *ip, unsigned mac_byte, char *err, size_t errlen)
{
	char spec[64], cidr[64], mac[32];

	snprintf(spec, sizeof(spec), "ring:%s:%c", ring, host == 1 ? 'a' : 'b');
	snprintf(cidr, sizeof(cidr), "%s/24", ip);
	snprintf(mac, sizeof(mac), "02:00:00:%02x:00:%02x", mac_byte & 0xff, host);
	return ptu_config(cfg, spec, cidr, mac, err, errlen);
}

/*
 * Engine on "ring:RING:a" at eip/24 with MAC 02:00:00:NN:00:01, peer on
 * "ring:RING:b" at pip/24 with MAC 02:00:00:NN:00:02 (NN = mac_byte in hex),
 * its frames handed to up. 0, or -errno with the reason in err.
 */
static inline int engine_peer_open(struct engine_peer *p, const char *ring, const char *eip,
				   const char *pip, unsigned mac_byte,
				   const struct rocemu_port_upper *up, char *err, size_t errlen)
{
	struct rocemu_port_config cfg;
	int rc;

	rc = engine_peer_config(&cfg, ring, 1, eip, mac_byte, err, errlen);
	if (!rc)
		rc = rocemu_engine_create(&cfg, &p->e, err, errlen);
	if (rc < 0)
		return rc;
	p->eport = rocemu_engine_port(p->e);
	rc = engine_peer_config(&cfg, ring, 2, pip, mac_byte, err, errlen);
	if (!rc)
		rc = rocemu_port_open(&cfg, &p->pport, err, errlen);
	if (rc < 0)
		return rc;
	rocemu_port_set_upper(p->pport, up);
	rocemu_port_progress_thread_stop(p->eport);
	rocemu_port_progress_thread_stop(p->pport);
	rocemu_port_mac(p->eport, p->emac);
	rocemu_port_mac(p->pport, p->pmac);
	rocemu_gid_parse(eip, p->egid);
	rocemu_gid_parse(pip, p->pgid);
	p->egid_index = rocemu_port_gid_find(p->eport, p->egid);
	if (p->egid_index < 0) {
		snprintf(err, errlen, "%s is not in the engine's GID table", eip);
		return -ENOENT;
	}
	return 0;
}

#endif
