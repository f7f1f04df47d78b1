/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Enhanced Connection Establishment (ibv_query_ece(3), ibv_set_ece(3)): the
 * vendor options a QP offers its peer in the CM REQ and REP, which rdma_cm
 * carries and negotiates (docs/rdmacm.md, "ECE").
 *
 * rocemu is a vendor of its own, the vendor ID ibv_query_device reports
 * (0xffffff: no IEEE OUI), and implements no vendor option. So a QP's ECE is
 * that vendor ID with no options. ibv_set_ece takes rocemu's vendor ID (a
 * peer of another vendor: rdma_cm sets ours with no options) and any
 * options, and keeps those rocemu implements, none, as a NIC keeps the ones
 * its firmware knows; ibv_query_ece then reports what was kept.
 */
#include <errno.h>

#include "provider.h"

#define ROCEMU_ECE_VENDOR  0xffffffu
#define ROCEMU_ECE_OPTIONS 0u /* the options rocemu implements */

int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	ece->vendor_id = ROCEMU_ECE_VENDOR;
	ece->options = ROCEMU_ECE_OPTIONS;
	ece->comp_mask = 0;
	return 0;
}
ROCEMU_PUBLIC(ibv_query_ece)

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece || ece->comp_mask || ece->vendor_id != ROCEMU_ECE_VENDOR)
		return EINVAL;
	if (qp->qp_type == IBV_QPT_UD || qp->qp_type == IBV_QPT_RAW_PACKET)
		return EOPNOTSUPP; /* no connection to establish */
	return 0;
}
ROCEMU_PUBLIC(ibv_set_ece)
