/* gemm_sm90_parts: the pieces of the Hopper expert GEMM that every kernel running its tiles shares
 * (kernels/gemm_sm90.cu's grouped GEMM, kernels/megakernel_fwd.cu's compute blocks): tile geometry, the SwiGLU and
 * bf16 epilogue arithmetic, the swizzled C staging, slot release and the wgmma shapes. See gemm_sm90.cu for how
 * they fit together. */
#pragma once
#include <cuda.h> /* CUtensorMap */
#include <stdint.h>

#include "common/common.cuh"
#include "common/sm90_ptx.cuh"

namespace mok_sm90 {

constexpr int kTileM = 128;               /* two consumer warpgroups of 64 rows */
constexpr int kBlockK = 64;               /* bf16 per row of a box: 128 bytes, one 128B-swizzle row */
constexpr int kRowBytes = kBlockK * 2;    /* 128 */
constexpr int kSlotABytes = kTileM * kRowBytes; /* 16 KiB */
constexpr int kThreads = 384;
constexpr int kProducerRegs = 40, kConsumerRegs = 232; /* setmaxnreg: 128 x 40 + 256 x 232 = 384 x 168 */
constexpr int kStartRegs = 168;                         /* what every thread starts with (kernel_resources checks) */

/* Output columns one tile stores: SwiGLU pairs gate and up columns, halving them. */
__host__ __device__ constexpr int tile_cols(int tile_n, int swiglu) { return swiglu ? tile_n / 2 : tile_n; }

#if MOK_SM90_DEVICE
/* Two floats to bf16 (round to nearest even, as __float2bfloat16_rn: bitwise the same) in one instruction, lo in
 * the low half, instead of one conversion each. Fewer instructions in the epilogues; the layer time did not move
 * measurably at the power cap (A/B on 2 x H200, results/h200x2/2026-11-30-megakernel-v7). */
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float rcp_approx(float x)
{
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t swiglu_bf16x2(float g0, float u0, float g1, float u1)
{
    /* The reference rounds GEMM1's output to bf16 before SwiGLU: so does this, a pair per conversion */
    const uint32_t g = pack_bf16x2(g0, g1), u = pack_bf16x2(u0, u1);
    g0 = __uint_as_float(g << 16), g1 = __uint_as_float(g & 0xFFFF0000u);
    u0 = __uint_as_float(u << 16), u1 = __uint_as_float(u & 0xFFFF0000u);
    /* silu(g) = g / (1 + 2^(-g log2 e)): one ex2 and one rcp (the MUFU pipe) per value, flush-to-zero forms, so no
     * subnormal fix-ups around them (__expf's non-ftz ex2 adds a compare and two predicated multiplies per value;
     * nothing here is subnormal that matters: 2^x below 2^-126 flushes to 0, silu(g) = g there, and 1 + e >= 1).
     * expf with an IEEE division took ~9k cycles of each GEMM1 tile's epilogue in the megakernel and made the layer
     * 3-8% slower at the power cap (profile and A/B on 2 x H200, megakernel-v7); the ftz forms against __expf /
     * __fdividef measured the same (new / old 0.993-1.020, one A/B). Relative error ~1e-6 against the
     * accurate fp32 reference, far inside a bf16 rounding step; a value next to a bf16 rounding boundary may round
     * the other way (one bf16 ulp). A gate below about -88: 2^(-g log2 e) is inf, its rcp 0, silu -0 (its limit). */
    return pack_bf16x2(g0 * rcp_approx(1.0f + ex2_approx(g0 * -1.4426950408889634f)) * u0,
                       g1 * rcp_approx(1.0f + ex2_approx(g1 * -1.4426950408889634f)) * u1);
}

/* C staging: boxes of 64 rows x 64 columns (128 bytes per row), 128B-swizzled as the C tensor map expects: the
 * 16-byte chunk q of row r sits at chunk q ^ (r % 8). The 4-byte word of columns (col, col + 1), col even, of
 * row r goes to box col / 64. In one store instruction the 32 lanes hold 8 rows x 4 words of one chunk, which
 * the XOR spreads over all 32 banks. */
constexpr int kBoxBytes = 64 * kRowBytes;
__device__ __forceinline__ void stage_word(uint8_t *stage, int r, int col, uint32_t v)
{
    int box = col >> 6, chunk = (col & 63) >> 3;
    *reinterpret_cast<uint32_t *>(stage + box * kBoxBytes + r * kRowBytes + ((chunk ^ (r & 7)) << 4) +
                                  (col & 7) * 2) = v;
}

/* A consumer warp is done with a slot: tell this CTA's producer and, in a cluster, the peer's, whose B half sits
 * in the slot too (the peer refills it by multicast). Lane c signals CTA c, so the arrivals go out in parallel. */
__device__ __forceinline__ void release_slot(uint64_t *empty_bar, int cm, int lane, int crank)
{
    if (lane == crank)
        mok_mbar_arrive(empty_bar);
    else if (lane < cm)
        mok_mbar_arrive_cluster(empty_bar, (uint32_t)lane);
}

/* out[g] = sum of count(g') for g' < g, for g in [0, groups] (out[groups]: the total), by one warp, 32 groups
 * per step with a shuffle scan. count(g) is called for g < groups only and may validate (and trap on) its group. */
template <typename Count>
__device__ __forceinline__ void warp_group_prefix(int groups, int lane, int *out, Count count)
{
    int carry = 0;
    for (int base = 0; base <= groups; base += 32) {
        int g = base + lane, cnt = g < groups ? count(g) : 0;
        int v = cnt; /* inclusive warp scan */
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, v, d);
            if (lane >= d)
                v += y;
        }
        if (g <= groups)
            out[g] = carry + v - cnt;
        carry += __shfl_sync(0xffffffffu, v, 31);
    }
}

template <int N> __device__ __forceinline__ void wgmma_k16(float (&acc)[N / 2], uint64_t da, uint64_t db);
template <> __device__ __forceinline__ void wgmma_k16<128>(float (&acc)[64], uint64_t da, uint64_t db)
{
    mok_wgmma_m64n128k16(acc, da, db);
}
template <> __device__ __forceinline__ void wgmma_k16<256>(float (&acc)[128], uint64_t da, uint64_t db)
{
    mok_wgmma_m64n256k16(acc, da, db);
}
#endif

/* Host side, defined in gemm_sm90.cu: the process's failure record (mapped host memory, printed at exit; NULL while
 * a stream is being captured and none exists yet), and the 128B-swizzled tensor map of a row-major bf16 matrix
 * [rows][k] read or written in boxes of box_rows x 64. */
struct mok_sm90_diag *diag_record(cudaStream_t s);
bool encode_tile_map(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows);

} // namespace mok_sm90
