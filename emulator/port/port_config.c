/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Port configuration: the option words shared by `rocemu port`, `rocemu run`
 * and the config file, and the port specification string
 * (memif:server:SOCK, af_packet:IFACE, ring:PAIR:a, dpdk:DEVARGS, ...).
 * Every error is one line naming the option and the offending value.
 */
#include <arpa/inet.h>
#include <sched.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "port_link.h"

/* Fill err with a one-line message (when given) and return rc. */
int port_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

void rocemu_port_config_init(struct rocemu_port_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->name, sizeof(cfg->name), "rocemu0");
}

void port_gid_from_ipv4(uint8_t gid[16], uint32_t ipv4_be)
{
	memset(gid, 0, 10);
	gid[10] = 0xff;
	gid[11] = 0xff;
	memcpy(gid + 12, &ipv4_be, 4);
}

bool port_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

uint32_t port_gid_ipv4(const uint8_t gid[16])
{
	uint32_t v;

	memcpy(&v, gid + 12, 4);
	return v;
}

const char *port_gid_str(const uint8_t gid[16], char *buf, size_t len)
{
	if (port_gid_is_v4(gid))
		inet_ntop(AF_INET, gid + 12, buf, len);
	else
		inet_ntop(AF_INET6, gid, buf, len);
	return buf;
}

int rocemu_gid_parse(const char *text, uint8_t gid[16])
{
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, text, &a4) == 1) {
		port_gid_from_ipv4(gid, a4.s_addr);
		return 0;
	}
	if (inet_pton(AF_INET6, text, &a6) == 1) {
		memcpy(gid, &a6, 16);
		return 0;
	}
	return -EINVAL;
}

static int parse_u64(const char *val, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!val || !*val || *val == '-' || isspace((unsigned char)*val))
		return -EINVAL;
	errno = 0;
	v = strtoull(val, &end, 0);
	if (errno || end == val)
		return -EINVAL;
	/* size suffixes for byte counts: k, M, G (powers of 1024) */
	if (*end == 'k' || *end == 'K') {
		v <<= 10;
		end++;
	} else if (*end == 'M') {
		v <<= 20;
		end++;
	} else if (*end == 'G') {
		v <<= 30;
		end++;
	}
	if (*end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_mac(const char *val, uint8_t mac[6])
{
	unsigned b[6];
	char tail;

	if (sscanf(val, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
		   &tail) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	if (mac[0] & 1) /* multicast bit: not a station address */
		return -EINVAL;
	return 0;
}

static int set_ip(struct rocemu_port_config *cfg, const char *val, char *err, size_t errlen)
{
	char addr[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(val, '/');
	struct rocemu_ip_addr ip = {0};
	size_t alen = slash ? (size_t)(slash - val) : strlen(val);
	uint64_t prefix;

	if (cfg->n_ips >= ROCEMU_PORT_MAX_IPS)
		return port_fail(err, errlen, -EINVAL, "--ip %s: at most %d addresses per port",
				 val, ROCEMU_PORT_MAX_IPS);
	if (alen == 0 || alen >= sizeof(addr))
		return port_fail(err, errlen, -EINVAL, "--ip '%s': expected ADDR[/PREFIX]", val);
	memcpy(addr, val, alen);
	addr[alen] = 0;
	if (rocemu_gid_parse(addr, ip.gid))
		return port_fail(err, errlen, -EINVAL,
				 "--ip '%s': '%s' is not an IPv4 or IPv6 address", val, addr);
	ip.is_v6 = !port_gid_is_v4(ip.gid) || strchr(addr, ':') != NULL;
	if (ip.is_v6 && port_gid_is_v4(ip.gid))
		return port_fail(err, errlen, -EINVAL,
				 "--ip '%s': write IPv4 addresses in dotted form, not IPv4-mapped",
				 val);
	if (!slash) {
		/* the one rule for --ip, `rocemu run`, `rocemu port` and the config
		 * file (documented in their help): /24 for IPv4, /64 for IPv6 */
		ip.prefix = ip.is_v6 ? ROCEMU_IP_DEFAULT_PREFIX6 : ROCEMU_IP_DEFAULT_PREFIX4;
	} else {
		if (parse_u64(slash + 1, ip.is_v6 ? 128 : 32, &prefix))
			return port_fail(err, errlen, -EINVAL,
					 "--ip '%s': prefix length must be 0..%d for %s", val,
					 ip.is_v6 ? 128 : 32, ip.is_v6 ? "IPv6" : "IPv4");
		ip.prefix = (uint8_t)prefix;
	}
	if (!ip.is_v6) {
		uint32_t a = ntohl(port_gid_ipv4(ip.gid));
		if (a == 0 || a == 0xffffffffu || (a >> 28) == 0xe || (a >> 24) == 127)
			return port_fail(err, errlen, -EINVAL,
					 "--ip '%s': not a unicast host address", val);
	} else if (ip.gid[0] == 0xff) {
		return port_fail(err, errlen, -EINVAL, "--ip '%s': multicast is not a host address",
				 val);
	} else {
		static const uint8_t zero[16], lo[16] = {[15] = 1};
		if (!memcmp(ip.gid, zero, 16) || !memcmp(ip.gid, lo, 16))
			return port_fail(err, errlen, -EINVAL,
					 "--ip '%s': not a unicast host address", val);
	}
	for (unsigned i = 0; i < cfg->n_ips; i++)
		if (!memcmp(cfg->ips[i].gid, ip.gid, 16))
			return port_fail(err, errlen, -EINVAL, "--ip '%s': address given twice",
					 val);
	cfg->ips[cfg->n_ips++] = ip;
	return 0;
}

/* "tx:N", "rx:N" or "N" (both directions). */
static int set_fault_ppm(uint32_t arr[2], const char *opt, const char *val, char *err,
			 size_t errlen)
{
	int lo = 0, hi = 1;
	uint64_t v;

	if (!strncmp(val, "tx:", 3)) {
		hi = 0;
		val += 3;
	} else if (!strncmp(val, "rx:", 3)) {
		lo = 1;
		val += 3;
	}
	if (parse_u64(val, 1000000, &v))
		return port_fail(err, errlen, -EINVAL,
				 "--%s '%s': expected [tx:|rx:]PPM, parts per million 0..1000000",
				 opt, val);
	for (int d = lo; d <= hi; d++)
		arr[d] = (uint32_t)v;
	return 0;
}

static int set_fault_list(struct rocemu_fault_config *f, const char *val, char *err, size_t errlen)
{
	int dir;
	const char *p;
	unsigned n = 0;

	if (!strncmp(val, "tx:", 3))
		dir = 0;
	else if (!strncmp(val, "rx:", 3))
		dir = 1;
	else
		return port_fail(err, errlen, -EINVAL,
				 "--fault-drop-list '%s': expected tx:N,N,... or rx:N,N,...", val);
	p = val + 3;
	memset(f->drop_list[dir], 0, sizeof(f->drop_list[dir]));
	while (*p) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (errno || end == p || v == 0 || v > UINT32_MAX || (*end && *end != ','))
			return port_fail(
			    err, errlen, -EINVAL,
			    "--fault-drop-list '%s': packet indices are 1-based integers", val);
		if (n >= 31)
			return port_fail(err, errlen, -EINVAL,
					 "--fault-drop-list '%s': at most 31 indices per direction",
					 val);
		f->drop_list[dir][n++] = (uint32_t)v;
		p = *end ? end + 1 : end;
	}
	return 0;
}

static int set_fault(struct rocemu_port_config *cfg, const char *opt, const char *val, char *err,
		     size_t errlen)
{
	struct rocemu_fault_config *f = &cfg->fault;
	const char *what = opt + strlen("fault-");
	uint64_t v;
	int rc;

	if (!strcmp(what, "seed")) {
		if (parse_u64(val, UINT64_MAX, &v))
			return port_fail(err, errlen, -EINVAL, "--%s '%s': expected an integer",
					 opt, val);
		f->seed = v;
		rc = 0;
	} else if (!strcmp(what, "drop")) {
		rc = set_fault_ppm(f->drop_ppm, opt, val, err, errlen);
	} else if (!strcmp(what, "dup")) {
		rc = set_fault_ppm(f->dup_ppm, opt, val, err, errlen);
	} else if (!strcmp(what, "reorder")) {
		rc = set_fault_ppm(f->reorder_ppm, opt, val, err, errlen);
	} else if (!strcmp(what, "corrupt")) {
		rc = set_fault_ppm(f->corrupt_ppm, opt, val, err, errlen);
	} else if (!strcmp(what, "delay")) {
		rc = set_fault_ppm(f->delay_ppm, opt, val, err, errlen);
	} else if (!strcmp(what, "delay-us")) {
		if (parse_u64(val, 10000000, &v))
			return port_fail(err, errlen, -EINVAL,
					 "--%s '%s': expected microseconds 0..10000000", opt, val);
		f->delay_us = (uint32_t)v;
		rc = 0;
	} else if (!strcmp(what, "drop-list")) {
		rc = set_fault_list(f, val, err, errlen);
	} else {
		return port_fail(err, errlen, -ENOENT, "unknown option --%s", opt);
	}
	if (rc == 0)
		cfg->fault_enabled = true;
	return rc;
}

static int set_ms(uint32_t *out, const char *opt, const char *val, uint64_t min, uint64_t max,
		  char *err, size_t errlen)
{
	uint64_t v;

	if (parse_u64(val, max, &v) || v < min)
		return port_fail(err, errlen, -EINVAL,
				 "--%s '%s': expected an integer %" PRIu64 "..%" PRIu64, opt, val,
				 min, max);
	*out = (uint32_t)v;
	return 0;
}

int rocemu_port_config_set(struct rocemu_port_config *cfg, const char *opt, const char *val,
			   char *err, size_t errlen)
{
	uint64_t v;
	char spec_err[256];

	if (!opt)
		return port_fail(err, errlen, -ENOENT, "missing option name");
	if (!val)
		return port_fail(err, errlen, -EINVAL, "--%s needs a value", opt);

	if (!strcmp(opt, "port")) {
		char arg[ROCEMU_PORT_SPEC_MAX];

		if (strlen(val) >= sizeof(cfg->spec))
			return port_fail(err, errlen, -EINVAL,
					 "--port: specification longer than %d bytes",
					 ROCEMU_PORT_SPEC_MAX - 1);
		if (!port_link_parse(val, arg, sizeof(arg), spec_err, sizeof(spec_err)))
			return port_fail(err, errlen, -EINVAL, "--port '%s': %s", val, spec_err);
		snprintf(cfg->spec, sizeof(cfg->spec), "%s", val);
		return 0;
	}
	if (!strcmp(opt, "name")) {
		if (!*val || strlen(val) >= sizeof(cfg->name))
			return port_fail(err, errlen, -EINVAL, "--name '%s': 1..%d characters", val,
					 ROCEMU_PORT_NAME_MAX - 1);
		for (const char *p = val; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
				return port_fail(err, errlen, -EINVAL,
						 "--name '%s': use letters, digits, '_', '-', '.'",
						 val);
		snprintf(cfg->name, sizeof(cfg->name), "%s", val);
		return 0;
	}
	if (!strcmp(opt, "mac")) {
		if (parse_mac(val, cfg->mac))
			return port_fail(
			    err, errlen, -EINVAL,
			    "--mac '%s': expected a unicast MAC like 02:00:00:00:00:01", val);
		cfg->mac_set = true;
		return 0;
	}
	if (!strcmp(opt, "ip"))
		return set_ip(cfg, val, err, errlen);
	if (!strcmp(opt, "mtu")) {
		if (parse_u64(val, 9600, &v) || v < 576)
			return port_fail(err, errlen, -EINVAL, "--mtu '%s': expected 576..9600",
					 val);
		cfg->mtu = (uint16_t)v;
		return 0;
	}
	if (!strcmp(opt, "capture")) {
		if (!*val || strlen(val) >= sizeof(cfg->capture_path) - 16)
			return port_fail(err, errlen, -EINVAL, "--capture: path empty or too long");
		snprintf(cfg->capture_path, sizeof(cfg->capture_path), "%s", val);
		return 0;
	}
	if (!strcmp(opt, "capture-filter")) {
		if (strlen(val) >= sizeof(cfg->capture_filter))
			return port_fail(err, errlen, -EINVAL,
					 "--capture-filter: longer than %zu bytes",
					 sizeof(cfg->capture_filter) - 1);
		/* compiled (and checked) by libpcap when the capture opens */
		snprintf(cfg->capture_filter, sizeof(cfg->capture_filter), "%s", val);
		return 0;
	}
	if (!strcmp(opt, "capture-rotate")) {
		if (parse_u64(val, UINT64_MAX >> 1, &v) || (v && v < 4096))
			return port_fail(
			    err, errlen, -EINVAL,
			    "--capture-rotate '%s': bytes per file, 0 or >= 4096 (k/M/G allowed)",
			    val);
		cfg->capture_rotate_bytes = v;
		return 0;
	}
	if (!strcmp(opt, "arp-timeout"))
		return set_ms(&cfg->arp_timeout_ms, opt, val, 1, 600000, err, errlen);
	if (!strcmp(opt, "arp-retries"))
		return set_ms(&cfg->arp_retries, opt, val, 1, 100, err, errlen);
	if (!strcmp(opt, "arp-expire"))
		return set_ms(&cfg->arp_expire_ms, opt, val, 1, 86400000, err, errlen);
	if (!strcmp(opt, "mbufs"))
		return set_ms(&cfg->n_mbufs, opt, val, 512, 1u << 20, err, errlen);
	if (!strcmp(opt, "memif-wait")) {
		int rc = set_ms(&cfg->memif_wait_ms, opt, val, 0, 3600000, err, errlen);

		cfg->memif_wait_set |= rc == 0;
		return rc;
	}
	if (!strcmp(opt, "vlan")) {
		if (parse_u64(val, 4094, &v) || v < 1)
			return port_fail(err, errlen, -EINVAL,
					 "--vlan '%s': expected a VLAN ID 1..4094", val);
		cfg->vlan = (uint16_t)v;
		return 0;
	}
	if (!strcmp(opt, "vlan-untagged")) {
		if (strcmp(val, "accept") && strcmp(val, "drop"))
			return port_fail(err, errlen, -EINVAL,
					 "--vlan-untagged '%s': expected accept or drop", val);
		cfg->vlan_untagged = !strcmp(val, "accept");
		return 0;
	}
	if (!strcmp(opt, "ecn")) {
		if (!strcmp(val, "ect0"))
			cfg->ecn = ROCEMU_ECN_ECT0;
		else if (!strcmp(val, "ect1"))
			cfg->ecn = ROCEMU_ECN_ECT1;
		else if (!strcmp(val, "off"))
			cfg->ecn = ROCEMU_ECN_OFF;
		else
			return port_fail(err, errlen, -EINVAL,
					 "--ecn '%s': expected ect0, ect1 or off", val);
		return 0;
	}
	if (!strcmp(opt, "progress-cpu")) {
		if (parse_u64(val, CPU_SETSIZE - 1, &v))
			return port_fail(err, errlen, -EINVAL,
					 "--progress-cpu '%s': expected a CPU number 0..%d", val,
					 CPU_SETSIZE - 1);
		cfg->progress_cpu = (uint16_t)v;
		cfg->progress_cpu_set = true;
		return 0;
	}
	if (!strncmp(opt, "fault-", 6))
		return set_fault(cfg, opt, val, err, errlen);
	return port_fail(err, errlen, -ENOENT, "unknown option --%s", opt);
}

/* The calling thread's CPUs as a list ("0-1", "0,2"), for messages. */
static void cpus_text(const cpu_set_t *set, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int c = 0; c < CPU_SETSIZE && at < len; c++) {
		int last = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		at += (size_t)snprintf(buf + at, len - at, last > c ? "%s%d-%d" : "%s%d",
				       at ? "," : "", c, last);
		c = last;
	}
}

int port_progress_cpu(const struct rocemu_port_config *cfg, int *cpu, char *err, size_t errlen)
{
	const char *env = getenv("ROCEMU_PROGRESS_CPU");
	const char *what = "--progress-cpu";
	char cpus[256];
	cpu_set_t set;
	uint64_t v = cfg->progress_cpu;

	*cpu = -1;
	if (!cfg->progress_cpu_set) {
		if (!env || !*env)
			return 0;
		what = "ROCEMU_PROGRESS_CPU";
		if (parse_u64(env, CPU_SETSIZE - 1, &v))
			return port_fail(err, errlen, -EINVAL,
					 "ROCEMU_PROGRESS_CPU='%s': expected a CPU number 0..%d",
					 env, CPU_SETSIZE - 1);
	}
	if (sched_getaffinity(0, sizeof(set), &set))
		return port_fail(err, errlen, -errno, "%s %u: cannot read the CPU mask: %s", what,
				 (unsigned)v, strerror(errno));
	if (!CPU_ISSET((int)v, &set)) {
		cpus_text(&set, cpus, sizeof(cpus));
		return port_fail(err, errlen, -EINVAL,
				 "%s %u: CPU %u is not one this process may run on (%s)", what,
				 (unsigned)v, (unsigned)v, cpus);
	}
	*cpu = (int)v;
	return 0;
}

int rocemu_port_config_validate(const struct rocemu_port_config *cfg, char *err, size_t errlen)
{
	char arg[ROCEMU_PORT_SPEC_MAX];
	char spec_err[256];

	if (!cfg->spec[0])
		return port_fail(err, errlen, -EINVAL, "no port given (--port SPEC)");
	if (!port_link_parse(cfg->spec, arg, sizeof(arg), spec_err, sizeof(spec_err)))
		return port_fail(err, errlen, -EINVAL, "--port '%s': %s", cfg->spec, spec_err);
	if (!cfg->name[0])
		return port_fail(err, errlen, -EINVAL, "empty device name");
	if (cfg->capture_rotate_bytes && !cfg->capture_path[0])
		return port_fail(err, errlen, -EINVAL, "--capture-rotate needs --capture FILE");
	if (cfg->capture_filter[0] && !cfg->capture_path[0])
		return port_fail(err, errlen, -EINVAL, "--capture-filter needs --capture FILE");
	if (cfg->vlan_untagged && !cfg->vlan)
		return port_fail(err, errlen, -EINVAL, "--vlan-untagged needs --vlan ID");
	int cpu;

	return port_progress_cpu(cfg, &cpu, err, errlen);
}
