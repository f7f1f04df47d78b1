/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Trace points: ROCEMU_TRACE=TOPIC[,TOPIC...] (or "all") makes the port
 * write one line per traced event to stderr, e.g. each state change of a
 * memif link ("memif"). Off, a trace point costs one load of a flag. The
 * engine otherwise prints nothing: a trace is output the user asked for.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
