/* bf16.h: the GPU tests' host bf16 conversions (round to nearest even, as the seeded fills do). */
#ifndef MOK_TESTS_BF16_H
#define MOK_TESTS_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

static inline float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
