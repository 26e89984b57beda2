/* gemm/sm90_fp8_rega.cuh: fp8_block with A from registers (the megakernel's 128 x 256 tiles with fp8_rega 1; the
 * core's fp8_block policy, consume_tile_fp8_block in sm90_core.cuh, is the same arithmetic with A from shared memory).
 *
 * Why: fp8_block promotes every 128-K product into the fp32 accumulators, and while a warpgroup waits for its product
 * and promotes it, its tensor work stops: 10-22% of the fused forward (a build without the promotion, results/h100x1/
 * 2026-12-06-promote-order section 2). Hiding it needs a product in flight while the one before is promoted, which
 * with 128 accumulators leaves room for two 64-column products only (2 x 32 registers). With A from shared memory a
 * 64-column product reads A for half the FLOPs of a 128-column one, and that variant lost 1.6-3.8% (7e4b34c). Here
 * each thread loads its A fragment of a k block once (four 16-byte loads, 16 registers) and every product's wgmmas
 * take it from the registers: shared memory serves only B.
 *
 * Per k block: products 0 and 1 issued (buffers p0, p1), then for each product h: wait until it is done, promote it
 * (acc += part x a_scale(row) x b_scale), issue product h + 2 into the buffer just promoted. Only the last product's
 * promotion runs with nothing of this warpgroup in flight; it is waited for before the next slot wait (a wgmma in
 * flight across the wait's timeout path makes ptxas serialize every wgmma of the kernel, C7518; 7e4b34c).
 *
 * The fragment (gemm/fp8_rega.h): thread q = lane % 4 of a warp holds, per k32 step, four e4m3 codes of each of its
 * rows lane / 4 and + 8 at two places 16 K apart; it reads bytes [32 q, + 32) of each row (chunks 2 q and 2 q + 1 of
 * the 128B-swizzled row: four 16-byte loads a k block), and the weights are stored with K permuted within each 128-K
 * block to match (mok_fp8_rega_pos; permuted at setup by mok_fp8_rega_permute). A stays as quantized. */
#pragma once
#include <stdint.h>

#include "common/sm90_ptx.cuh"
#include "gemm/fp8_rega.h"
#include "gemm/sm90_core.cuh"
#include "gemm/sm90_mx_expand.cuh" /* mx_lds128 */

namespace mok_sm90 {

#if MOK_SM90_DEVICE
/* One 64-column product h of the k block (B rows [64 h, +64) of the slot) into part: four wgmma k32 from the
 * fragment a. */
__device__ __forceinline__ void fp8_rega_product(float (&part)[32], const uint32_t (&a)[4][4], uint64_t db, int h)
{
#pragma unroll
    for (int i = 0; i < 32; i++)
        mok_reg_fence(part[i]);
    mok_wgmma_fence(); /* the previous promotion's reads of part (and the fragment's loads) before the wgmmas */
#pragma unroll
    for (int s = 0; s < 4; s++)
        mok_wgmma_m64n64k32_e4m3_rs(part, a[s][0], a[s][1], a[s][2], a[s][3],
                                    db + 2 * s + h * (64 * kRowBytes >> 4), s > 0);
    mok_wgmma_commit();
}

/* acc += part x scale for product h (part register 4c + j: row la (j < 2) or la + 8, column 64 h + 8 c + ..; the tile's
 * register 32 h + 4c + j, in column half (32 h) / kHalf) */
template <int kCols>
__device__ __forceinline__ void fp8_rega_promote(float (&acc)[kCols / 2], float (&part)[32], int h, float a_lo,
                                                 float a_hi, float b_lo, float b_hi)
{
#pragma unroll
    for (int i = 0; i < 32; i++)
        mok_reg_fence(part[i]); /* no read of part may move above the wait */
    const float b = 32 * h >= kCols / 4 ? b_hi : b_lo, s_lo = a_lo * b, s_hi = a_hi * b;
#pragma unroll
    for (int i = 0; i < 32; i++)
        acc[32 * h + i] = fmaf(part[i], (i % 4) >= 2 ? s_hi : s_lo, acc[32 * h + i]);
}

/* One consumer warpgroup's k loop over a 64-row x kCols tile (kCols / 2 accumulators a thread), A from registers;
 * scales as consume_tile_fp8_block's (kLiveA: A's through L2, a k block ahead). wq: this thread's warp in the
 * warpgroup. */
template <int kCols, bool kLiveA>
__device__ __forceinline__ void consume_tile_fp8_block_rega(RingPos &r, int stages, uint64_t *full, uint64_t *empty,
                                                            float (&acc)[kCols / 2], int k_blocks, uint8_t *smem_a,
                                                            int a_offset, int slot_a_bytes, uint8_t *smem_b,
                                                            int slot_b_bytes, int wq, int lane,
                                                            struct mok_sm90_diag *diag, int role, int tile,
                                                            const float *sa, int sa_hi, const float *sb, int sb_hi)
{
    constexpr int kProducts = kCols / 64;
    static_assert(kProducts >= 2 && kProducts % 2 == 0, "products in pairs of 64 columns");
    float p0[32], p1[32];
#pragma unroll
    for (int i = 0; i < kCols / 2; i++)
        acc[i] = 0.0f;
    /* this thread's rows la and la + 8 of the warpgroup's 64, chunks 2 q and 2 q + 1 under the 128B swizzle */
    const int la = wq * 16 + lane / 4, q = lane % 4;
    const uint32_t row0 = (uint32_t)(a_offset + la * kRowBytes), row1 = row0 + 8 * kRowBytes;
    const uint32_t c0 = (uint32_t)(((2 * q) ^ (la & 7)) << 4), c1 = (uint32_t)(((2 * q + 1) ^ (la & 7)) << 4);
    float ahead[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    fp8_block_scales<kLiveA>(ahead, sa, sa_hi, sb, sb_hi, 0);
    for (int kb = 0; kb < k_blocks; kb++) {
        float sc[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            sc[i] = ahead[i];
        fp8_block_scales<kLiveA>(ahead, sa, sa_hi, sb, sb_hi, min(kb + 1, k_blocks - 1));
        mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
        const uint32_t slot_a = mok_smem_addr(smem_a + (size_t)r.slot * slot_a_bytes);
        const uint4 x0 = mx_lds128(slot_a + row0 + c0), x1 = mx_lds128(slot_a + row0 + c1);
        const uint4 y0 = mx_lds128(slot_a + row1 + c0), y1 = mx_lds128(slot_a + row1 + c1);
        /* step s: a0 row la's word (s, 0), a1 row la + 8's, a2 / a3 their words (s, 1) */
        const uint32_t a[4][4] = {{x0.x, y0.x, x0.y, y0.y},
                                  {x0.z, y0.z, x0.w, y0.w},
                                  {x1.x, y1.x, x1.y, y1.y},
                                  {x1.z, y1.z, x1.w, y1.w}};
        mok_fence_proxy_async_shared(); /* A read (generic) before the producer's next TMA into the slot */
        const uint64_t db = mok_wgmma_desc_sw128(smem_b + (size_t)r.slot * slot_b_bytes);
        fp8_rega_product(p0, a, db, 0);
        fp8_rega_product(p1, a, db, 1);
#pragma unroll
        for (int h = 0; h < kProducts; h++) {
            float(&part)[32] = h % 2 ? p1 : p0;
            if (h < kProducts - 1) {
                mok_wgmma_wait<1>(); /* product h done, h + 1 in flight */
            } else {
                mok_wgmma_wait<0>();
                release_slot(&empty[r.slot], 1, lane, 0);
            }
            fp8_rega_promote<kCols>(acc, part, h, sc[0], sc[1], sc[2], sc[3]);
            if (h + 2 < kProducts)
                fp8_rega_product(part, a, db, h + 2);
        }
        r.advance(stages);
    }
}
#endif

} // namespace mok_sm90
