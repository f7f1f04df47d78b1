/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rsockets wire format (rsocket_wire.h): connection data, immediate data,
 * SGEs and iomap entries. Byte order is explicit everywhere: the connection
 * data is big endian, descriptors written into a peer's memory are in the
 * reader's order.
 */
#include "rsocket_wire.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

uint8_t rs_host_net_flag(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN ? RS_CONN_FLAG_NET : 0;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
}
static void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}
static void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}
static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return be16toh(v);
}
static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return be32toh(v);
}
static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return be64toh(v);
}

static void conn_sge_put(uint8_t *p, const struct rs_sge *s)
{
	put_be64(p, s->addr);
	put_be32(p + 8, s->key);
	put_be32(p + 12, s->length);
}

static void conn_sge_get(const uint8_t *p, struct rs_sge *s)
{
	s->addr = get_be64(p);
	s->key = get_be32(p + 8);
	s->length = get_be32(p + 12);
}

void rs_conn_put(uint8_t *out, const struct rs_conn *c)
{
	memset(out, 0, RS_CONN_DATA_LEN);
	out[0] = c->version;
	out[1] = c->flags;
	put_be16(out + 2, c->credits);
	out[7] = c->target_iomap_size;
	conn_sge_put(out + 8, &c->target_sgl);
	conn_sge_put(out + 24, &c->data_buf);
}

bool rs_sge_sane(const struct rs_sge *s)
{
	return s->addr + s->length >= s->addr;
}

int rs_conn_get(const uint8_t *p, size_t len, struct rs_conn *c)
{
	if (!p || len < RS_CONN_DATA_LEN)
		return -EPROTO;
	memset(c, 0, sizeof(*c));
	c->version = p[0];
	if (c->version != RS_CONN_VERSION)
		return -EPROTONOSUPPORT;
	c->flags = p[1];
	c->credits = get_be16(p + 2);
	c->target_iomap_size = (c->flags & RS_CONN_FLAG_IOMAP) ? p[7] : 0;
	conn_sge_get(p + 8, &c->target_sgl);
	conn_sge_get(p + 24, &c->data_buf);
	/* The peer's target SGL: where our credit updates go, entry after
	 * entry; its iomap follows it. Its size must be small and the whole
	 * area must not wrap (the address arithmetic stays defined). */
	if (c->target_sgl.length == 0 || c->target_sgl.length > RS_MAX_PEER_SGL)
		return -EPROTO;
	uint64_t area = (uint64_t)c->target_sgl.length * RS_SGE_LEN +
			(uint64_t)rs_scale_to_value(c->target_iomap_size) * RS_IOMAP_LEN;
	if (c->target_sgl.addr + area < c->target_sgl.addr || !rs_sge_sane(&c->data_buf))
		return -EPROTO;
	return 0;
}

uint8_t rs_value_to_scale(unsigned value)
{
	if (value <= 128)
		return (uint8_t)value;
	if (value >= (127u << 8))
		return 255;
	return (uint8_t)(128 | (value >> 8));
}

unsigned rs_scale_to_value(uint8_t scale)
{
	return scale <= 128 ? scale : (unsigned)(scale & 127) << 8;
}

/* Descriptors in the reader's byte order: little endian unless it set NET. */
static void put_u32_order(uint8_t *p, uint32_t v, bool be)
{
	v = be ? htobe32(v) : htole32(v);
	memcpy(p, &v, 4);
}
static void put_u64_order(uint8_t *p, uint64_t v, bool be)
{
	v = be ? htobe64(v) : htole64(v);
	memcpy(p, &v, 8);
}

void rs_sge_put(uint8_t *out, const struct rs_sge *s, bool reader_net)
{
	put_u64_order(out, s->addr, reader_net);
	put_u32_order(out + 8, s->key, reader_net);
	put_u32_order(out + 12, s->length, reader_net);
}

void rs_iomap_put(uint8_t *out, const struct rs_iomap *m, bool reader_net)
{
	put_u64_order(out, m->offset, reader_net);
	rs_sge_put(out + 8, &m->sge, reader_net);
}

/* The peer may write these bytes at any time: copy them once, then decode
 * the copy, so that every field comes from the same snapshot. */
static void snapshot(uint8_t *dst, const volatile uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i];
}

void rs_sge_get(const volatile uint8_t *in, struct rs_sge *s)
{
	uint8_t b[RS_SGE_LEN];

	snapshot(b, in, sizeof(b));
	memcpy(&s->addr, b, 8);
	memcpy(&s->key, b + 8, 4);
	memcpy(&s->length, b + 12, 4);
}

void rs_iomap_get(const volatile uint8_t *in, struct rs_iomap *m)
{
	uint8_t b[RS_IOMAP_LEN];

	snapshot(b, in, sizeof(b));
	memcpy(&m->offset, b, 8);
	memcpy(&m->sge.addr, b + 8, 8);
	memcpy(&m->sge.key, b + 16, 4);
	memcpy(&m->sge.length, b + 20, 4);
}
