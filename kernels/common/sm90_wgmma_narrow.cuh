/* common/sm90_wgmma_narrow.cuh: bf16 wgmma m64nNk16 for the narrow N the megakernel's swapped tail units run
 * (kernels/megakernel/swap_tail.cuh: an expert's last, partial row block with its tokens as wgmma's N, rounded up
 * to 32 rows, so 85 rows cost an n96 product, not the m64 x 2 of a 128-row block). N = 32, 96, 112; the
 * 64, 128 and 256 forms are in common/sm90_ptx.cuh, whose conventions these follow: both operands from shared
 * memory, K-major (kTa = kTb = 0; 1 reads one transposed), scale-d 1 (D += A*B), fp32 accumulators d[N / 2]. */
#pragma once

#include "common/sm90_ptx.cuh"

#if MOK_SM90_DEVICE

/* D[64 x 32] += A[64 x 16] * B[32 x 16]^T, fp32 accumulators d[16]. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n32k16(float (&d)[16], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P16 "}, "
                 "%16, %17, p, 1, 1, %18, %19;\n"
                 "}\n"
        : MOK_WGMMA_D16
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory");
}

/* D[64 x 96] += A[64 x 16] * B[96 x 16]^T, fp32 accumulators d[48]. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n96k16(float (&d)[48], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P48 "}, "
                 "%48, %49, p, 1, 1, %50, %51;\n"
                 "}\n"
        : MOK_WGMMA_D48
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory");
}

/* D[64 x 112] += A[64 x 16] * B[112 x 16]^T, fp32 accumulators d[56]. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n112k16(float (&d)[56], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P56 "}, "
                 "%56, %57, p, 1, 1, %58, %59;\n"
                 "}\n"
        : MOK_WGMMA_D56
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory");
}

#endif
