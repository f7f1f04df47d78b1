/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gid_ndev: what a plain libibverbs program learns of the first device's
 * GID table, the way rdma-core's users learn it (issue 22.2), one line a
 * GID:
 *   INDEX GID TYPE NDEV_IFINDEX NDEV
 * TYPE and NDEV_IFINDEX from ibv_query_gid_ex (checked against
 * ibv_query_gid_table and ibv_query_gid_type), NDEV the content of
 * ports/1/gid_attrs/ndevs/INDEX through ibv_read_sysfs_file. Linked to the
 * system libibverbs, run under `rocemu run`; vlan_pair.sh compares the
 * lines with the port's interface and VLAN. Exit 1 when the calls disagree.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

/* rdma-core's, declared in its <infiniband/driver.h> (for providers) */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       int *type);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

int main(void)
{
	struct ibv_gid_entry table[64], e;
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	ssize_t n;
	int bad = 0;

	if (!devs || !devs[0] || !(ctx = ibv_open_device(devs[0]))) {
		fprintf(stderr, "gid_ndev: no device\n");
		return 1;
	}
	n = ibv_query_gid_table(ctx, table, 64, 0);
	if (n <= 0) {
		fprintf(stderr, "gid_ndev: ibv_query_gid_table: %zd\n", n);
		return 1;
	}
	for (ssize_t i = 0; i < n; i++) {
		char path[64], ndev[64] = "", gid[INET6_ADDRSTRLEN];
		int type = -1;

		if (ibv_query_gid_ex(ctx, 1, table[i].gid_index, &e, 0) ||
		    e.ndev_ifindex != table[i].ndev_ifindex || e.gid_type != table[i].gid_type ||
		    ibv_query_gid_type(ctx, 1, e.gid_index, &type) ||
		    type != (e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0)) {
			fprintf(stderr, "gid_ndev: GID %u: the calls disagree\n", e.gid_index);
			bad = 1;
		}
		snprintf(path, sizeof(path), "ports/1/gid_attrs/ndevs/%u", table[i].gid_index);
		if (ibv_read_sysfs_file(devs[0]->ibdev_path, path, ndev, sizeof(ndev)) < 0)
			snprintf(ndev, sizeof(ndev), "-");
		ndev[strcspn(ndev, "\n")] = '\0';
		inet_ntop(AF_INET6, table[i].gid.raw, gid, sizeof(gid));
		printf("%u %s %s %u %s\n", table[i].gid_index, gid,
		       table[i].gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCEv2" : "other",
		       table[i].ndev_ifindex, ndev);
	}
	ibv_close_device(ctx);
	ibv_free_device_list(devs);
	return bad;
}
