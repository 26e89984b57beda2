/* seeded.h: the libmok tests' seeded host generator and bf16 rounding (tests/bf16.h), shared by their test programs
 * and host references. */
#ifndef MOK_TESTS_SEEDED_H
#define MOK_TESTS_SEEDED_H

#include <stdint.h>

#include "bf16.h"

static inline uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}
static inline float uniform(uint32_t *s) { return (float)lcg(s) / (float)(1u << 24) * 2.0f - 1.0f; }
static inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

#endif
