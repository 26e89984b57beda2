/* megakernel/fp8_comm.cuh: the FP8 forwards' dispatch (mok_mega_args.fp8): the push quantizes each token row as it
 * sends it (fp8_block 1 x 128, mxfp8 per 32), so e4m3 values and their scales cross NVLink (about half a bf16
 * row's bytes), and the scatter copies the landed rows into the expert slots GEMM1 reads.
 * A wire row sits in the first hidden + hidden / 32 bytes of a (bf16-sized) landing row: the token's hidden e4m3
 * bytes, then its scales: hidden / 128 fp32 (fp8_block) or hidden / 32 e8m0 bytes (mxfp8), the NCCL baselines' wire
 * format (kernels/util/fp8_rows.cu). Unlike the
 * bf16 push, a token routed to this rank's own experts is quantized into its own landing row too, so every slot
 * row comes from a wire row and each token is quantized once (the bf16 path reads own rows where they are).
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it before comm.cuh, whose
 * roles call it); its names live in that file's anonymous namespace. */
#pragma once

#include "util/fp8_quant.cuh"

namespace {

#if MOK_SM90_DEVICE
/* 256-value passes per warp in flight (loads issued before the first quantizes): 8, a 4096-value row in two
 * rounds of loads instead of four (the push is latency-bound: one warp per token); ptxas -v showed the FP8
 * instances' spills as with 4 (tests/kernel_resources.sh holds today's), 16 made the wide ones spill 120-208.
 * ff94329 ran 4 + 4 double-buffered (a group's loads in flight while the one before is quantized) with another
 * encode, and its push took 13% longer (ncu, results/h100x1/2026-12-06-quant-encode section 2); the two changes were
 * not measured apart. */
constexpr int kFp8Unroll = 8;

/* Rank p's wire row of token t in this rank's window, or (remote) at peer q's: the landing rows [p][t]. */
__device__ __forceinline__ size_t wire_row_off(const mok_lsa_args &a, int p, int t)
{
    return a.off_land + ((size_t)p * a.t_max + t) * a.hidden * 2;
}

/* The bf16 row src (hidden values, a multiple of 256) quantized by one warp, 256 values per pass, 8 per lane (two
 * 1 x 128 blocks, a half warp each; kMx: eight blocks of 32, a quad each): store(byte, q, block, scale) gets each
 * lane's 8 e4m3 bytes at byte offset `byte` of the row and, on the first lane of each block, its block's index and
 * scale (fp32 bits, or the e8m0 byte; block -1 on the other lanes). Every lane runs every pass: vecs is a multiple
 * of 32, so the bound is the same for the whole warp (the quantizers' shuffles need all 32 lanes). The inputs are
 * finite by the problem's construction: the amax bits that would flag inf or NaN are not read (the separate
 * quantize kernels report them). kDivide: fp8_block's values by divisions (quant_block128's), in the fused kernel's
 * comm role, whose registers the GEMM roles share: its faster encode made the wide send=1 instance spill 208 bytes
 * (72 with the divisions). */
template <bool kMx, bool kDivide, typename Store>
__device__ __forceinline__ void quantize_row(const uint4 *src, int hidden, int lane, Store store)
{
    const int vecs = hidden / 8;
    for (int v0 = lane; v0 < vecs; v0 += 32 * kFp8Unroll) {
        uint4 val[kFp8Unroll];
#pragma unroll
        for (int u = 0; u < kFp8Unroll; u++)
            if (v0 + 32 * u < vecs)
                val[u] = src[v0 + 32 * u];
#pragma unroll
        for (int u = 0; u < kFp8Unroll; u++)
            if (v0 + 32 * u < vecs) {
                const int v = v0 + 32 * u; /* values [8 v, 8 v + 8): block v / 16 (kMx: v / 4) */
                if constexpr (kMx) {
                    uint8_t e;
                    const uint2 q = mok_fp8::quant_block32(val[u], &e);
                    store(8 * v, q, lane % 4 == 0 ? v / 4 : -1, (uint32_t)e);
                } else {
                    float s;
                    uint32_t amax_bits;
                    const uint2 q = mok_fp8::quant_block128<kDivide>(val[u], &s, &amax_bits);
                    store(8 * v, q, lane % 16 == 0 ? v / 16 : -1, __float_as_uint(s));
                }
            }
    }
}

/* The fp8 push, one warp per own token: its row quantized once and stored as a wire row into the landing row
 * [my rank][t] of every rank one of its experts lives on, this one included. The caller then flags "landed" (in
 * every window, mine too: the scatter waits for all of them). kDivide: quantize_row's. */
template <bool kMx, bool kDivide = false>
__device__ __forceinline__ void push_rows_fp8(const mok_lsa_args &a, int warp, int nwarps, int lane)
{
    const int H = a.hidden;
    for (int t = warp; t < a.my_tokens; t += nwarps) {
        const unsigned bit = lane < a.topk ? 1u << (a.my_ids[t * a.topk + lane] / a.local_experts) : 0u;
        const unsigned ranks = __reduce_or_sync(0xffffffffu, bit);
        if (!ranks)
            continue;
        const size_t off = wire_row_off(a, a.rank, t);
        quantize_row<kMx, kDivide>(landed_row(a, a.rank, t), H, lane, [&](int byte, uint2 q, int block, uint32_t s) {
            for (unsigned r = ranks; r; r &= r - 1) {
                uint8_t *dst = (uint8_t *)ncclGetLsaPointer((ncclWindow_t)a.window, off, __ffs(r) - 1);
                *reinterpret_cast<uint2 *>(dst + byte) = q;
                if (block >= 0 && kMx)
                    dst[H + block] = (uint8_t)s;
                else if (block >= 0)
                    *reinterpret_cast<uint32_t *>(dst + H + 4 * block) = s;
            }
        });
    }
}

/* scatter_landed's fp8 form: every rank's wire rows (mine included) have landed; chunks [c0, c1) of the slots, chunk
 * c by part (c - c0) % parts, each slot's wire row copied whole into m.xq (the slots are wire rows too), each
 * chunk's ready counter released by the rows copied (scatter_landed says how). */
__device__ __forceinline__ void scatter_landed_fp8(const mok_mega_args &m, int c0, int c1, int part, int parts,
                                                   struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    if ((int)threadIdx.x < a.nranks)
        wait_flag((const uint64_t *)ncclGetLsaPointer(
                      (ncclWindow_t)a.window,
                      a.off_flags + ((size_t)2 * MOK_LSA_MAX_RANKS + threadIdx.x) * sizeof(uint64_t), a.rank),
                  a.epoch[0], diag, (int)threadIdx.x);
    __syncthreads();
    const int used = min(a.offset[a.local_experts], a.capacity), row_bytes = fp8_row_bytes(a.hidden);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = c0 + part; c < c1; c += parts) {
        int s1 = min((c + 1) * a.chunk_rows, used), copied = 0;
        for (int s = c * a.chunk_rows + warp; s < s1; s += kWarps) {
            const int32_t e = a.entry[s];
            if (e < 0)
                continue; /* padding: GEMM1 computes it, nothing reads it */
            const uint8_t *src = (const uint8_t *)ncclGetLsaPointer(
                (ncclWindow_t)a.window, wire_row_off(a, (int)((uint32_t)e >> 25), (e >> 5) & 0xFFFFF), a.rank);
            copy_row<kDispatchUnroll>((const uint4 *)src, (uint4 *)(m.xq + (size_t)s * row_bytes), row_bytes / 16,
                                      lane);
            copied++;
        }
        release_chunk_rows(a, c, copied, lane);
    }
}

#endif

} // namespace
