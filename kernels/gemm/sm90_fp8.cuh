/* gemm/sm90_fp8.cuh: the GEMM core's FP8 precision policies (sm90_core.cuh has the ring, the bf16 mainloop and the
 * epilogue pieces they share): fp8_block (consume_tile_fp8_block, promoted per 128 K with the row and block scales)
 * and mxfp8 promoted per 32 K (consume_tile_mxfp8, issue 22's scheme (a)). Their users: the grouped GEMM
 * (sm90_grouped_kernel.cuh) and the fused forward's FP8 compute role (megakernel/fp8_compute.cuh). */
#pragma once
#include <stdint.h>

#include "common/sm90_ptx.cuh"
#include "gemm/sm90_core.cuh"

namespace mok_sm90 {

#if MOK_SM90_DEVICE
/* The fp8_block precision policy (DeepSeek-V3's recipe: e4m3 A rows with one fp32 scale per row per 128 K, e4m3 B
 * with one per 128 x 128 block). A k block is 128 e4m3 = 128 bytes per row: the same boxes, slots and swizzle as
 * bf16's 64. A warpgroup's accumulator tile is 64 rows of kCols columns (128 x 128 tiles: 128; 128 x 256: 256),
 * computed as kParts products of N = kCols / kParts columns: a product runs its four wgmma m64nNk32 into `part` (the
 * first with scale-d false, so nothing zeroes it), and once they are done part is promoted into the fp32
 * accumulators with the block's scales, acc += part * a_scale(row) * b_scale (DeepGEMM's promotion per 128 K: the
 * tensor cores' fp8 accumulation keeps fewer bits than fp32, so a whole K summed there loses accuracy); after the
 * last product the slot goes back. While one warpgroup promotes, the other's wgmmas keep the tensor cores busy.
 * One `part` serves the products in turn: a consumer thread holds kCols / 2 accumulators plus N / 2. kCols 256
 * spilled in the 384-thread layout (sm90_core.cuh's lean_layout says what is known): its kernel runs the lean layout.
 * Scales, one float per k block: sa points at this thread's row la's, sa + sa_hi at row la + 8's; sb at the B block
 * of the accumulator columns' first half, sb + sb_hi at that of the second half (SwiGLU's gate and up blocks, or the
 * tile's column halves; the same block in a 128-column tile without SwiGLU: sb_hi 0). Loaded before the slot wait
 * (with kLiveA a whole k block ahead, below), so their latency hides under it.
 * pump.step() runs before each slot wait and pump.drain() after the tile's last release: the lean layout's inline
 * producer (InlineProducer), nothing in the 384-thread layout (NoPump). kLiveA: A's scales are written during the
 * kernel (the megakernel's dispatch and GEMM1 epilogue), so they are read through L2 (ld.global.cg), not the
 * read-only path that __ldg takes (valid only for data no one writes while the kernel runs). */
template <int kN> __device__ __forceinline__ void wgmma_e4m3_k32(float (&d)[kN / 2], uint64_t da, uint64_t db, int acc);
template <> __device__ __forceinline__ void wgmma_e4m3_k32<64>(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
    mok_wgmma_m64n64k32_e4m3(d, da, db, acc);
}
template <> __device__ __forceinline__ void wgmma_e4m3_k32<128>(float (&d)[64], uint64_t da, uint64_t db, int acc)
{
    mok_wgmma_m64n128k32_e4m3(d, da, db, acc);
}

struct NoPump {
    __device__ __forceinline__ void step() {}
    __device__ __forceinline__ void drain() {}
};

/* fp8_block's scales of k block kb: A's rows la and la + 8 (sa, sa + sa_hi), B's two column halves (sb, sb + sb_hi) */
template <bool kLiveA>
__device__ __forceinline__ void fp8_block_scales(float (&s)[4], const float *sa, int sa_hi, const float *sb, int sb_hi,
                                                 int kb)
{
    s[0] = kLiveA ? __ldcg(sa + kb) : __ldg(sa + kb);
    s[1] = kLiveA ? __ldcg(sa + sa_hi + kb) : __ldg(sa + sa_hi + kb);
    s[2] = __ldg(sb + kb), s[3] = __ldg(sb + sb_hi + kb);
}

template <int kCols, int kParts, class Pump, bool kLiveA = false>
__device__ __forceinline__ void consume_tile_fp8_block(RingPos &r, int stages, uint64_t *full, uint64_t *empty,
                                                       float (&acc)[kCols / 2], int k_blocks, uint8_t *smem_a,
                                                       int a_offset, int slot_a_bytes, uint8_t *smem_b,
                                                       int slot_b_bytes, int cm, int lane, int crank,
                                                       struct mok_sm90_diag *diag, int role, int tile,
                                                       const float *sa, int sa_hi, const float *sb, int sb_hi,
                                                       Pump &pump)
{
    constexpr int kN = kCols / kParts, kPart = kN / 2; /* columns and accumulators of one product */
    constexpr int kHalf = kCols / 4;                   /* accumulators of the first column half */
    static_assert(kN == 64 || kN == 128, "products of 64 or 128 columns");
    float part[kPart];
#pragma unroll
    for (int i = 0; i < kCols / 2; i++)
        acc[i] = 0.0f;
    /* kLiveA: the scales are loaded a k block ahead (A's come through L2, and a block's time hides that latency where
     * the slot wait alone did not: 1.7-2.7% of the megakernel's fp8_block forward, results/h100x1/
     * 2026-12-06-promote-order); the grouped GEMM's (read-only path) as they are needed, as there the registers for
     * four more made its 384-thread instance spill */
    float ahead[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (kLiveA)
        fp8_block_scales<kLiveA>(ahead, sa, sa_hi, sb, sb_hi, 0);
    for (int kb = 0; kb < k_blocks; kb++) {
        float sc[4];
        if constexpr (kLiveA) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                sc[i] = ahead[i];
            fp8_block_scales<kLiveA>(ahead, sa, sa_hi, sb, sb_hi, min(kb + 1, k_blocks - 1));
        } else {
            fp8_block_scales<kLiveA>(sc, sa, sa_hi, sb, sb_hi, kb);
        }
        const float a_lo = sc[0], a_hi = sc[1], b_lo = sc[2], b_hi = sc[3];
        pump.step();
        mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
        const uint64_t da = mok_wgmma_desc_sw128(smem_a + (size_t)r.slot * slot_a_bytes + a_offset);
        const uint64_t db = mok_wgmma_desc_sw128(smem_b + (size_t)r.slot * slot_b_bytes);
#pragma unroll
        for (int h = 0; h < kParts; h++) {
#pragma unroll
            for (int i = 0; i < kPart; i++)
                mok_reg_fence(part[i]);
            mok_wgmma_fence(); /* the previous promotion's reads of part before the wgmmas overwrite it */
            /* B rows [kN h, +kN) of the slot: kN x 128 bytes on (>> 4 in the descriptor's address field) */
#pragma unroll
            for (int kk = 0; kk < kFp8BlockK / 32; kk++)
                wgmma_e4m3_k32<kN>(part, da + 2 * kk, db + 2 * kk + h * (kN * kRowBytes >> 4), kk > 0);
            mok_wgmma_commit();
            mok_wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < kPart; i++)
                mok_reg_fence(part[i]); /* no read of part may move above the wait */
            if (h == kParts - 1)
                release_slot(&empty[r.slot], cm, lane, crank); /* cm, crank: the cluster (1, 0 without) */
            /* part register 4c + j: columns 8c.. of this product, row la (j < 2) or la + 8; the tile's register
             * kPart h + 4c + j, in column half (kPart h + 4c) / kHalf */
#pragma unroll
            for (int i = 0; i < kPart; i++) {
                const int t = kPart * h + i;
                const float s = ((i % 4) >= 2 ? a_hi : a_lo) * (t >= kHalf ? b_hi : b_lo);
                acc[t] = fmaf(part[i], s, acc[t]);
            }
        }
        r.advance(stages);
    }
    pump.drain();
}

/* The mxfp8 precision policy (OCP MX v1.0, src/fp8.h: e4m3 A rows and B rows, each with one e8m0 scale per 32 K;
 * issue 22's scheme (a)). A k block is 128 e4m3 per row, the same boxes and slots as fp8_block's, but a scale covers
 * only one wgmma k32: every k32 step's product is promoted on its own, acc += part x 2^(ea - 127) x 2^(eb - 127),
 * with ea the scale of the accumulator's row and eb that of its column (B's scales vary per output column, unlike
 * fp8_block's 128 x 128 blocks). Per k32 step kParts products of N = 128 / kParts columns, each one wgmma
 * m64nNk32 into `part` (scale-d false: nothing zeroes it) and its promotion once it is done, so the tensor cores
 * run one k32 between promotions (the other warpgroup's wgmmas fill the gaps).
 * Scales: the A bytes of this thread's two rows from global memory (sa: row la's [k / 32], sa + sa_hi row lb's; 4
 * bytes per k block, loaded before the slot wait like fp8_block's); the B bytes from the slot's 512-byte scale
 * area (smem_bs + slot x 512), which the producer fills with the operands in the GEMM's tile layout
 * (mok_scale_mx_tiles, src/fp8.h mok_mxfp8_scale_tiles): two 64-row blocks (the accumulator columns [0, 64) and
 * [64, 128)) of 256 bytes, byte kk 64 + q 16 + 2 c + p holding k32 step kk of column 8 c + 2 q + p. So the 16 bytes
 * at kk 64 + (lane % 4) 16 of a block are exactly the columns this lane's fragment holds (registers 4c + p and
 * 4c + 2 + p), one 16-byte load, the four lanes of a row reading 64 consecutive bytes (no bank conflict).
 * The scale product is an exponent sum, float bits ((ea + eb - 127) << 23) = 2^(ea - 127) x 2^(eb - 127) exactly
 * while 1 <= ea + eb - 127 <= 254 (the product a normal fp32): blocks of quantized bf16 data have e8m0 bytes of
 * 0..247 (src/fp8.c), and products below 2^-126 (both blocks' amax under ~2^-54) would need subnormal scales;
 * such blocks flush their contribution to zero here (an fp32 accumulator could not hold most of it anyway).
 * The B scales of a product are read into registers before its wgmma wait, so the slot can go back before the last
 * promotion. Registers: 64 accumulators, N / 2 of part, N / 4 of B scale words (kParts 2: 32 + 4). kLiveA: as
 * consume_tile_fp8_block's (A's scales written during the kernel: read through L2). */
template <int kParts, bool kLiveA = false>
__device__ __forceinline__ void consume_tile_mxfp8(RingPos &r, int stages, uint64_t *full, uint64_t *empty,
                                                   float (&acc)[64], int k_blocks, uint8_t *smem_a, int a_offset,
                                                   int slot_a_bytes, uint8_t *smem_b, int slot_b_bytes,
                                                   const uint8_t *smem_bs, int lane, struct mok_sm90_diag *diag,
                                                   int role, int tile, const uint8_t *sa, int sa_hi)
{
    constexpr int kN = 128 / kParts, kPart = kN / 2; /* columns and accumulators of one product */
    constexpr int kWords = kN / 16;                  /* 32-bit words of B scales per product: 4 columns each */
    float part[kPart];
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = 0.0f;
    const int q = lane % 4;
    for (int kb = 0; kb < k_blocks; kb++) {
        /* k32 steps kb*4 .. kb*4+3 of rows la and lb, a byte each (k / 32 is a multiple of 4: aligned words) */
        const uint32_t *wa = reinterpret_cast<const uint32_t *>(sa) + kb;
        const uint32_t *wb = reinterpret_cast<const uint32_t *>(sa + sa_hi) + kb;
        const uint32_t ea_lo = kLiveA ? __ldcg(wa) : __ldg(wa), ea_hi = kLiveA ? __ldcg(wb) : __ldg(wb);
        mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
        const uint64_t da = mok_wgmma_desc_sw128(smem_a + (size_t)r.slot * slot_a_bytes + a_offset);
        const uint64_t db = mok_wgmma_desc_sw128(smem_b + (size_t)r.slot * slot_b_bytes);
        const uint8_t *bs = smem_bs + (size_t)r.slot * kMxScaleSlot + q * 16;
#pragma unroll
        for (int kk = 0; kk < kFp8BlockK / 32; kk++) {
            /* (ea - 127) x 2^23 of both rows (a multiply: a left shift of a negative int is undefined): adding
             * eb << 23 gives the product's float bits */
            const int a_lo = ((int)((ea_lo >> (8 * kk)) & 0xFFu) - 127) * (1 << 23);
            const int a_hi = ((int)((ea_hi >> (8 * kk)) & 0xFFu) - 127) * (1 << 23);
#pragma unroll
            for (int h = 0; h < kParts; h++) {
#pragma unroll
                for (int i = 0; i < kPart; i++)
                    mok_reg_fence(part[i]);
                mok_wgmma_fence(); /* the previous promotion's reads of part before the wgmma overwrites it */
                /* k32 step kk: +32 bytes of K (2 in the descriptor); B rows [kN h, +kN) of the slot */
                wgmma_e4m3_k32<kN>(part, da + 2 * kk, db + 2 * kk + h * (kN * kRowBytes >> 4), 0);
                mok_wgmma_commit();
                /* this product's columns: 64-row block (kN h + 64 w) / 64 for w < kN / 64, 4 words each */
                uint32_t eb[kWords];
#pragma unroll
                for (int w = 0; w < kWords / 4; w++) {
                    const uint4 v = *reinterpret_cast<const uint4 *>(bs + (h * kN / 64 + w) * 256 + kk * 64);
                    eb[4 * w] = v.x, eb[4 * w + 1] = v.y, eb[4 * w + 2] = v.z, eb[4 * w + 3] = v.w;
                }
                mok_wgmma_wait<0>();
#pragma unroll
                for (int i = 0; i < kPart; i++)
                    mok_reg_fence(part[i]); /* no read of part may move above the wait */
                if (kk == kFp8BlockK / 32 - 1 && h == kParts - 1)
                    release_slot(&empty[r.slot], 1, lane, 0); /* no clusters under this policy */
                /* part register 4c + j: column 8c + 2q + (j % 2), row la (j < 2) or lb; its scale byte is byte
                 * 2c + j % 2 of this product's 16 per block, in word (2c + j % 2) / 4 */
#pragma unroll
                for (int i = 0; i < kPart; i++) {
                    const int c = i / 4, j = i % 4, byte = 2 * c + j % 2;
                    const int b = (int)(((eb[byte / 4] >> (8 * (byte % 4))) & 0xFFu) << 23);
                    acc[kPart * h + i] = fmaf(part[i], __int_as_float((j < 2 ? a_lo : a_hi) + b), acc[kPart * h + i]);
                }
            }
        }
        r.advance(stages);
    }
}
#endif

} // namespace mok_sm90
