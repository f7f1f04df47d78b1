/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the port lets the user see, and what it holds back:
 *  - trace points: ROCEMU_TRACE=TOPIC[,TOPIC...] (or "all") makes the port
 *    write one line per traced event to stderr, e.g. each state change of a
 *    memif link ("memif"). Off, a trace point costs one load of a flag. The
 *    engine otherwise prints nothing: a trace is output the user asked for.
 *    The transport's states ("resp", "comp") reach here through the verbs
 *    provider, which installs the engine's trace hook when they are asked for;
 *  - notices: a line handed to the config's notice callback while open
 *    waits (a memif client waiting for its server);
 *  - a PMD's own log, held to critical messages around calls that may fail
 *    as expected (ROCEMU_LOG keeps them).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_log.h>

#include "port_internal.h"

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static char trace_topics[256];

static void trace_read_env(void)
{
	const char *env = getenv("ROCEMU_TRACE");

	if (env)
		snprintf(trace_topics, sizeof(trace_topics), ",%s,", env);
}

bool port_trace_on(const char *topic)
{
	char key[64];

	pthread_once(&trace_once, trace_read_env);
	if (!trace_topics[0])
		return false;
	if (strstr(trace_topics, ",all,"))
		return true;
	snprintf(key, sizeof(key), ",%s,", topic);
	return strstr(trace_topics, key) != NULL;
}

void port_trace(const struct rocemu_port *port, const char *topic, const char *fmt, ...)
{
	char line[512];
	uint64_t now = rocemu_now_ns();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one write per line: lines of several threads do not interleave */
	fprintf(stderr, "rocemu-trace: %llu.%09llu %s %s: %s\n",
		(unsigned long long)(now / 1000000000ull),
		(unsigned long long)(now % 1000000000ull), port ? port->cfg.name : "-", topic,
		line);
}

bool rocemu_port_trace_on(const char *topic)
{
	return port_trace_on(topic);
}

void rocemu_port_trace_line(const struct rocemu_port *port, const char *topic, const char *line)
{
	port_trace(port, topic, "%s", line);
}

void port_notice(const struct rocemu_port *port, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!port->cfg.notice)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	port->cfg.notice(port->cfg.notice_arg, line);
}

static pthread_mutex_t quiet_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char type[32];
	unsigned depth;
	uint32_t saved;
} quiet[4];

/*
 * Hold the log type (a PMD's, "pmd.net.memif") to critical messages while
 * on, nested and from any thread; rocemu reports the failure itself, in one
 * line. ROCEMU_LOG=LEVEL keeps DPDK's own lines.
 */
void port_log_quiet(const char *logtype, bool on)
{
	unsigned slot = RTE_DIM(quiet), i;
	int type;

	if (getenv("ROCEMU_LOG"))
		return;
	pthread_mutex_lock(&quiet_lock);
	type = rte_log_register(logtype);
	for (i = 0; i < RTE_DIM(quiet); i++) {
		if (quiet[i].depth && !strcmp(quiet[i].type, logtype))
			break;
		if (!quiet[i].depth && slot == RTE_DIM(quiet))
			slot = i;
	}
	if (i < RTE_DIM(quiet))
		slot = i;
	if (type < 0 || slot == RTE_DIM(quiet)) {
		pthread_mutex_unlock(&quiet_lock);
		return;
	}
	if (on && quiet[slot].depth++ == 0) {
		snprintf(quiet[slot].type, sizeof(quiet[slot].type), "%s", logtype);
		quiet[slot].saved = rte_log_get_level(type);
		rte_log_set_level(type, RTE_LOG_CRIT);
	} else if (!on && quiet[slot].depth && --quiet[slot].depth == 0) {
		rte_log_set_level(type, quiet[slot].saved);
	}
	pthread_mutex_unlock(&quiet_lock);
}
