/*
 * endian.h - little-endian loads and stores of 16, 32 and 64-bit numbers
 * at any alignment. Every on-disk and in-Redis record granary writes is
 * little-endian on every host (fs/store/codec.h, meta/SCHEMA.md).
 */
#ifndef GRANARY_LIB_ENDIAN_H
#define GRANARY_LIB_ENDIAN_H

#include <stdint.h>

static inline uint16_t ld16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t ld32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t ld64(const unsigned char *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static inline void st16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void st32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void st64(unsigned char *p, uint64_t v)
{
	st32(p, (uint32_t)v);
	st32(p + 4, (uint32_t)(v >> 32));
}

#endif
