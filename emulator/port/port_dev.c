/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The port's device, whatever the link: the spec's link driver is looked up
 * once (port_links[]), then open runs its hooks in a fixed order around
 * what every link shares: the mempool (port_pool.c), one rx and one tx
 * queue, the MAC and GID table, capture, faults, the progress thread. Close
 * lets the last frames leave and gives everything back. The link drivers
 * are port_link_*.c; transmit is port_tx.c, progress port_progress.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_ethdev.h>

#include "port_link.h"

#define PORT_RX_DESC 1024
#define PORT_TX_DESC 1024

int port_dev_probe(struct rocemu_port *port, const char *devargs, char *err, size_t errlen)
{
	int rc = rte_dev_probe(devargs);

	if (rc < 0)
		return port_fail(err, errlen, rc, "cannot create DPDK device '%s': %s", devargs,
				 rte_strerror(-rc));
	port->dev_is_vdev = true;
	if (rte_eth_dev_get_port_by_name(port->dev_name, &port->port_id))
		return port_fail(err, errlen, -ENODEV, "device '%s' probed but has no ethdev port",
				 port->dev_name);
	return 0;
}

void port_dev_remove(struct rocemu_port *port)
{
	struct rte_eth_dev_info info;
	struct rte_device *dev = NULL;

	if (port->port_id == UINT16_MAX)
		return;
	if (rte_eth_dev_info_get(port->port_id, &info) == 0)
		dev = info.device;
	rte_eth_dev_stop(port->port_id);
	rte_eth_dev_close(port->port_id);
	if (dev && port->dev_is_vdev)
		rte_dev_remove(dev);
	port->port_id = UINT16_MAX;
}

bool port_has_device(const struct rocemu_port *port)
{
	return port->port_id != UINT16_MAX || port->link->tx_burst != NULL;
}

/* One rx and one tx queue; the MTU where the link asks for it. */
int port_dev_configure(struct rocemu_port *port, char *err, size_t errlen)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nb_rxd = PORT_RX_DESC, nb_txd = PORT_TX_DESC, id = port->port_id;
	int socket, rc;

	socket = rte_eth_dev_socket_id(id);
	if (socket < 0)
		socket = (int)rte_socket_id();
	rc = rte_eth_dev_info_get(id, &info);
	if (rc)
		return port_fail(err, errlen, rc, "%s: cannot read device info", port->dev_name);
	memset(&conf, 0, sizeof(conf));
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	rc = rte_eth_dev_configure(id, 1, 1, &conf);
	if (rc)
		return port_fail(err, errlen, rc, "%s: configure failed: %s", port->dev_name,
				 rte_strerror(-rc));
	rte_eth_dev_adjust_nb_rx_tx_desc(id, &nb_rxd, &nb_txd);
	rc = rte_eth_rx_queue_setup(id, 0, nb_rxd, (unsigned)socket, NULL, port->pool);
	rc = rc ?: rte_eth_tx_queue_setup(id, 0, nb_txd, (unsigned)socket, NULL);
	if (rc)
		return port_fail(err, errlen, rc, "%s: queue setup failed: %s", port->dev_name,
				 rte_strerror(-rc));
	if (port->link->set_dev_mtu) {
		rc = rte_eth_dev_set_mtu(id, port->eth_mtu);
		if (rc && rc != -ENOTSUP && port->cfg.mtu)
			return port_fail(err, errlen, rc, "%s: cannot set MTU %u: %s",
					 port->dev_name, port->eth_mtu, rte_strerror(-rc));
	}
	return 0;
}

/* Configure, then start. A link without an ethdev only starts itself. */
static int start_device(struct rocemu_port *port, char *err, size_t errlen)
{
	int rc;

	if (port->port_id == UINT16_MAX) /* a link without an ethdev */
		return port->link->start ? port->link->start(port, err, errlen) : 0;
	rc = port_dev_configure(port, err, errlen);
	if (rc)
		return rc;
	if (port->link->start)
		return port->link->start(port, err, errlen);
	rc = rte_eth_dev_start(port->port_id);
	if (rc)
		return port_fail(err, errlen, rc, "%s: start failed: %s", port->dev_name,
				 rte_strerror(-rc));
	return 0;
}

/* Give back the device and kernel resources (sockets, capture file);
 * memory stays (see port_close_at_exit). */
static void release_device(struct rocemu_port *port)
{
	if (port->link->offline)
		port->link->offline(port);
	if (port->link->release)
		port->link->release(port);
	else
		port_dev_remove(port);
	if (port->wake_fd >= 0)
		close(port->wake_fd);
	if (port->udp_hold_fd >= 0)
		close(port->udp_hold_fd);
	if (port->doorbell_fd >= 0)
		close(port->doorbell_fd);
	port->wake_fd = port->udp_hold_fd = port->doorbell_fd = -1;
	port->progress_cpu = -1;
	port_capture_close(port);
}

static void release(struct rocemu_port *port)
{
	release_device(port);
	port_fault_free(port);
	for (unsigned i = port->loop_head; i != port->loop_tail; i++)
		rte_pktmbuf_free(port->loop[i & (PORT_LOOP_SLOTS - 1)]);
	for (unsigned i = 0; i < port->tx_n; i++)
		rte_pktmbuf_free(port->tx_buf[i]);
	if (port->pool)
		rte_mempool_free(port->pool);
	pthread_mutex_destroy(&port->lock);
	free(port->link_priv);
	free(port);
}

/*
 * Before the device goes: let the frames already sent reach the peer. A
 * program's last frame is often an ACK queued just before it closes the
 * device; lost, the peer retries into the void until "retry counter
 * exceeded". First hand the device everything still buffered (it may be
 * full for a moment), then, as long as the link driver says frames may
 * still be on their way (a ring pair until the peer took them, memif a
 * short linger), wait. Bounded; the engine lock is held.
 */
#define PORT_CLOSE_DRAIN_NS 100000000ull /* 100 ms at most */

static void close_drain(struct rocemu_port *port)
{
	uint64_t start = rocemu_now_ns(), now = start;
	struct timespec ts = {0, 200000};

	if (!port_has_device(port))
		return;
	for (;;) {
		rocemu_port_flush(port);
		if (!port->tx_n &&
		    !(port->link->tx_in_flight && port->link->tx_in_flight(port, now)))
			break;
		if (now - start >= PORT_CLOSE_DRAIN_NS)
			break;
		nanosleep(&ts, NULL);
		now = rocemu_now_ns();
	}
	if (port->tx_n)
		port_count(port, PC_DROP_TX_UNSENT_AT_CLOSE);
}

/*
 * At process exit, for a port the program never closed: stop the thread,
 * flush the capture and release the device, but keep the memory (pool and
 * port structure): an upper layer may still hold mbufs, or close the port
 * from a destructor later, which then only frees the structure.
 */
void port_close_at_exit(struct rocemu_port *port)
{
	if (port->link->offline)
		port->link->offline(port);
	rocemu_port_progress_thread_stop(port);
	rocemu_port_lock(port);
	if (!port->closed_at_exit && port_has_device(port))
		close_drain(port);
	release_device(port);
	port->closed_at_exit = true;
	rocemu_port_unlock(port);
}

static struct rocemu_port *port_alloc(const struct rocemu_port_config *cfg,
				      const struct port_link_ops *link)
{
	struct rocemu_port *port = calloc(1, sizeof(*port));

	if (!port)
		return NULL;
	port->link_priv = link->priv_size ? calloc(1, link->priv_size) : NULL;
	if (link->priv_size && !port->link_priv) {
		free(port);
		return NULL;
	}
	port->cfg = *cfg;
	port->link = link;
	port->port_id = UINT16_MAX;
	port->wake_fd = port->udp_hold_fd = port->doorbell_fd = -1;
	port->progress_cpu = -1;
	pthread_mutex_init(&port->lock, NULL);
	return port;
}

/* Everything after the device started. */
static int bring_up(struct rocemu_port *port, const char *arg, char *err, size_t errlen)
{
	int rc;

	port_choose_mac(port);
	port_build_gid_table(port);
	if (port->link->attach)
		port->link->attach(port, arg);
	if (port->link->addressed && (rc = port->link->addressed(port, arg, err, errlen)))
		return rc;
	rc = port_capture_open(port, err, errlen);
	if (rc)
		return rc;
	if (port->cfg.fault_enabled && (rc = port_fault_init(port)))
		return port_fail(err, errlen, rc, "cannot set up the fault injector");
	port->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (port->wake_fd < 0)
		return port_fail(err, errlen, -errno, "eventfd: %s", strerror(errno));
	rc = port_progress_cpu(&port->cfg, &port->progress_cpu, err, errlen);
	if (rc)
		return rc;
	port_eal_register(port);
	rc = rocemu_port_progress_thread_start(port);
	if (rc) {
		port_eal_unregister(port);
		return port_fail(err, errlen, rc, "cannot start the progress thread: %s",
				 strerror(-rc));
	}
	if (port->link->online)
		port->link->online(port);
	return 0;
}

static int open_once(const struct rocemu_port_config *cfg, const struct port_link_ops *link,
		     const char *arg, struct rocemu_port **out, char *err, size_t errlen)
{
	struct rocemu_port *port = port_alloc(cfg, link);
	const char *hold = getenv("ROCEMU_TX_HOLD");
	int rc = 0;

	if (!port)
		return port_fail(err, errlen, -ENOMEM, "out of memory");
	/* ROCEMU_TX_HOLD=0: every post sends its frames at once (port_tx.c,
	 * rocemu_port_flush_posted), to compare with and without in one build */
	port->tx_hold = !hold || strcmp(hold, "0") != 0;
	if (link->mtu)
		rc = link->mtu(port, arg, err, errlen);
	else
		port->eth_mtu = cfg->mtu ? cfg->mtu : PORT_DEFAULT_MTU;
	rc = rc ?: port_pool_create(port, err, errlen);
	rc = rc ?: link->create(port, arg, err, errlen);
	rc = rc ?: start_device(port, err, errlen);
	rc = rc ?: bring_up(port, arg, err, errlen);
	if (rc) {
		release(port);
		return rc;
	}
	*out = port;
	return 0;
}

int rocemu_port_open(const struct rocemu_port_config *cfg, struct rocemu_port **out, char *err,
		     size_t errlen)
{
	const struct port_link_ops *link;
	char arg[ROCEMU_PORT_SPEC_MAX];
	unsigned retry_ms;
	int rc;

	*out = NULL;
	rc = rocemu_port_config_validate(cfg, err, errlen);
	if (rc)
		return rc;
	link = port_link_parse(cfg->spec, arg, sizeof(arg), NULL, 0);
	rc = port_eal_init(link->needs_pci && link->needs_pci(arg));
	if (rc)
		return port_fail(err, errlen, rc, "%s", rocemu_eal_error());
	retry_ms = link->open_retry_ms ? link->open_retry_ms() : 0;
	if (retry_ms && link->pmd_log)
		port_log_quiet(link->pmd_log, true);
	for (unsigned ms = 0;; ms += 20) {
		rc = open_once(cfg, link, arg, out, err, errlen);
		if (rc != -EINVAL || ms >= retry_ms)
			break;
		nanosleep(&(struct timespec){0, 20000000}, NULL);
	}
	if (retry_ms && link->pmd_log)
		port_log_quiet(link->pmd_log, false);
	return rc;
}

void rocemu_port_close(struct rocemu_port *port)
{
	if (!port || port_in_forked_child())
		return;
	if (port->closed_at_exit) {
		pthread_mutex_destroy(&port->lock);
		free(port->link_priv);
		free(port); /* the pool may still be referenced; the process is ending */
		return;
	}
	if (port->link->offline)
		port->link->offline(port);
	rocemu_port_progress_thread_stop(port);
	port_eal_unregister(port);
	rocemu_port_lock(port);
	close_drain(port);
	rocemu_port_unlock(port);
	release(port);
}

int rocemu_port_qpn_alloc(struct rocemu_port *port, bool gsi, uint32_t *qpn)
{
	return port->link->qpn_alloc ? port->link->qpn_alloc(port, gsi, qpn) : -ENOTSUP;
}

int rocemu_port_host_id(const struct rocemu_port *port, struct rocemu_port_host_id *id)
{
	return port->link->host_id ? port->link->host_id(port, id) : -ENOTSUP;
}

void rocemu_port_qpn_free(struct rocemu_port *port, uint32_t qpn)
{
	if (port->link->qpn_free)
		port->link->qpn_free(port, qpn);
}

const struct rocemu_port_config *rocemu_port_get_config(const struct rocemu_port *port)
{
	return &port->cfg;
}

void rocemu_port_set_upper(struct rocemu_port *port, const struct rocemu_port_upper *upper)
{
	rocemu_port_lock(port);
	if (upper && upper->rx) {
		port->upper = *upper;
		__atomic_store_n(&port->has_upper, true, __ATOMIC_RELAXED);
	} else {
		memset(&port->upper, 0, sizeof(port->upper));
		__atomic_store_n(&port->has_upper, false, __ATOMIC_RELAXED);
	}
	atomic_store(&port->upper_has_work, false);
	rocemu_port_unlock(port);
}
