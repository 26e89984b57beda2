/* megakernel_bwd: the fused backward of one MoE layer in one persistent, cooperative launch after a stream-ordered
 * prologue (kernels/megakernel.h, struct mok_mega_bwd_args, says what it computes and in which order).
 *
 * Block roles, by blockIdx, as in the forward (forward.cu): the first comm_blocks dispatch dy rows with the
 * forward's dispatch (pull into the expert slots, or push to the landing rows then copied into the slots: the
 * same schedule, the input slot lsa.set holding dy), then join the compute blocks; the compute blocks run
 * bwd_compute.cuh's units. Nothing is combined by comm blocks: GEMM1 dgrad's epilogue sends every dx row to its
 * owner (the forward's send_from_gemm), and the owner's mok_lsa_grad_sum sums them after the done flags.
 *
 * The prologue: the epoch advances (ranks advance it in the same order: each forward's route, each backward), so
 * the landed and done flags of this backward are told apart from the forward's; the ready counters and done[]
 * start from zero. Every wait gives up after ~10 s with a record in the failure record (as the forward's).
 *
 * This file composes the forward's parts (layout, sync, units, comm, compute: their helpers) with bwd_units.cuh
 * (the unit list) and bwd_compute.cuh (the compute role), and holds the kernel and its launcher. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdio.h>
#include <string.h>

#include "common/common.cuh"
#include "gemm/sm90_core.cuh"
#include "comm/lsa_device.cuh"
#include "megakernel.h"
#include "common/sm90_ptx.cuh"

using namespace mok_sm90;

#include "megakernel/layout.cuh"
#include "megakernel/sync.cuh"
#include "megakernel/units.cuh"
#include "megakernel/fp8_comm.cuh"
#include "megakernel/comm.cuh"
#include "megakernel/compute.cuh"
#include "megakernel/bwd_units.cuh"
#include "megakernel/bwd_compute.cuh"

namespace {

static_assert(kTileM == 128 && kTileN == 256, "bwd_list (bwd_units.cuh) counts 128 x 256 tiles");

/* kShared: with the shared experts' units (b.sh.inter > 0; their tensor maps in smaps, unread otherwise) */
template <bool kShared>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_bwd_kernel(const __grid_constant__ BwdMaps maps, const __grid_constant__ mok_mega_bwd_args b,
                          struct mok_sm90_diag *diag, const __grid_constant__ BwdMaps smaps)
{
#if MOK_SM90_DEVICE
    const mok_mega_args &m = b.m;
    if ((int)blockIdx.x < m.comm_blocks) {
        comm_dispatch<false>(m);
        if (m.lsa.push && m.skip != 1)
            scatter_landed(m.lsa, first_round(m.lsa, m), slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks,
                           kScatterAll, diag);
        __syncthreads();
        if (m.skip != 2) /* compute skipped: the compute blocks send, the comm blocks are done */
            bwd_compute_role<kShared>(maps, smaps, b, 0, 0, true, diag);
    } else {
        bwd_compute_role<kShared>(maps, smaps, b, (int)blockIdx.x - m.comm_blocks, (int)gridDim.x - m.comm_blocks,
                                  false, diag);
    }
#else
    __trap(); /* built for a target without wgmma: the launcher refuses before getting here */
#endif
}

/* The backward's epoch: the forward's route counted epoch[0] up; this backward's flags carry the next value. And
 * the shared experts' group of rows, {0, own tokens}, where asked. */
__global__ void megakernel_bwd_prologue_kernel(uint64_t *epoch, int32_t *own_offset, int own_tokens)
{
    if (epoch)
        epoch[0] += 1;
    if (own_offset)
        own_offset[0] = 0, own_offset[1] = own_tokens;
}

int say(char *why, int why_len, const char *msg, long long v)
{
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, msg, v);
    return 0;
}

/* done[]: the ticket, a spare, the routed row blocks' counters, then the own tokens' (bwd_compute.cuh) */
size_t bwd_counters(int capacity, int t_max)
{
    return 2 + (size_t)(capacity / kTileM) + (size_t)((t_max + kTileM - 1) / kTileM);
}

/* The shared experts' tensor maps: the routed ones' roles (BwdMaps) on the own tokens' rows (t_max of them: TMA
 * reads zeros past them) and the one MLP's weights and gradients (group 0). */
bool encode_shared_maps(BwdMaps *s, const mok_mega_bwd_args::mok_mega_bwd_shared &sh, uint64_t t_max, uint64_t H,
                        bool reduce)
{
    const uint64_t SI = (uint64_t)sh.inter;
    return encode_tile_map(&s->dy, sh.dy, t_max, H, kTileM) && encode_tile_map(&s->w2t, sh.w2, H, SI, 64) &&
           encode_tile_map(&s->dgu, sh.dgu, t_max, 2 * SI, kTileM) &&
           encode_tile_map(&s->w13t, sh.w13, 2 * SI, H, 64) && encode_tile_map(&s->dyt, sh.dy, t_max, H, 64) &&
           encode_tile_map(&s->hwt, sh.hw, t_max, SI, 64) && encode_tile_map(&s->dgut, sh.dgu, t_max, 2 * SI, 64) &&
           encode_tile_map(&s->xt, sh.x, t_max, H, 64) &&
           (!sh.dw2_bf16 || encode_tile_map(&s->dw2c, sh.dw2_bf16, H, SI, 64)) &&
           (!sh.dw13_bf16 || encode_tile_map(&s->dw13c, sh.dw13_bf16, 2 * SI, H, 64)) &&
           (!reduce || (encode_tile_map_f32(&s->dw2c, sh.dw2_f32, H, SI, 64) &&
                        encode_tile_map_f32(&s->dw13c, sh.dw13_f32, 2 * SI, H, 64)));
}

int resolve_stages(const mok_mega_args *m, size_t limit)
{
    if (m->stages)
        return m->stages;
    int s = 8;
    while (s > 2 && smem_bytes(s, m->lsa.local_experts, 0) > limit)
        s--;
    return s;
}

} // namespace

extern "C" int mok_megakernel_next_epoch(uint64_t *epoch, mok_stream_t stream)
{
    megakernel_bwd_prologue_kernel<<<1, 1, 0, mok_cuda_stream(stream)>>>(epoch, nullptr, 0);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_megakernel_bwd_own_offset(int32_t *own_offset, int own_tokens, mok_stream_t stream)
{
    megakernel_bwd_prologue_kernel<<<1, 1, 0, mok_cuda_stream(stream)>>>(nullptr, own_offset, own_tokens);
    return MOK_LAUNCH_RESULT();
}

extern "C" size_t mok_megakernel_bwd_counters(int capacity, int t_max)
{
    return bwd_counters(capacity, t_max);
}

extern "C" int mok_megakernel_bwd_supports(const struct mok_mega_bwd_args *b, char *why, int why_len)
{
    const mok_mega_args *m = &b->m;
    const mok_lsa_args &a = m->lsa;
    mok_mega_args fwd = *m; /* what the forward's checks say of the same shapes and tuning */
    fwd.shared_inter = 0, fwd.gu = nullptr, fwd.split_half = 0, fwd.own_first = 0, fwd.lockstep = 0;
    fwd.send_from_gemm = 1, fwd.combine_blocks = 0, fwd.skip = 0;
    if (!mok_megakernel_supports(&fwd, why, why_len))
        return 0;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, megakernel_bwd_kernel<false>) != cudaSuccess) {
        cudaGetLastError();
        return say(why, why_len, "no sm_90a image of the backward megakernel in this build%.0lld", 0);
    }
    if (m->inter % kTileN)
        return say(why, why_len, "intermediate %lld: the backward's GEMM2-dgrad tiles are 256 columns of it (a "
                   "multiple of 256)", m->inter);
    if (a.combine_per_rank)
        return say(why, why_len, "combine per rank%.0lld: the backward sends dx per route (combine 0)", 0);
    if (!a.push)
        return say(why, why_len, "dispatch pull%.0lld: the backward pushes dy (dispatch push, layout landing)", 0);
    if (m->shared_inter)
        return say(why, why_len, "m.shared_inter %lld: the backward's shared experts are sh (or the caller's: set 0)",
                   m->shared_inter);
    const struct mok_mega_bwd_args::mok_mega_bwd_shared &sh = b->sh;
    if (sh.inter < 0 || sh.inter % kTileN)
        return say(why, why_len, "sh.inter %lld: 0, or the shared experts' intermediate, a multiple of 256 (their "
                   "GEMM2-dgrad tiles are 256 columns of it)", sh.inter);
    if (sh.inter && (sh.tokens < 0 || sh.tokens > a.t_max))
        return say(why, why_len, "sh.tokens %lld: the own tokens, 0..lsa.t_max", sh.tokens);
    if (sh.inter && (!sh.x || !sh.dy || !sh.gu || !sh.w13 || !sh.w2 || !sh.dgu || !sh.hw || !sh.dx))
        return say(why, why_len, "sh: x, dy, gu, w13, w2, dgu, hw and dx must be device pointers%.0lld", 0);
    if (sh.inter && (!!sh.dw13_f32 != !!b->dw13_f32 || !!sh.dw2_f32 != !!b->dw2_f32 ||
                     !!sh.dw13_bf16 != !!b->dw13_bf16 || !!sh.dw2_bf16 != !!b->dw2_bf16))
        return say(why, why_len, "sh's weight gradients: the same kind as the routed ones (fp32 or bf16)%.0lld", 0);
    if (sh.inter && b->own_offset)
        return say(why, why_len, "own_offset with sh.inter %lld: the shared experts run in the kernel, not after it",
                   sh.inter);
    if (m->skip < 0 || m->skip > 2)
        return say(why, why_len, "skip %lld: 0 (everything), 1 (compute alone) or 2 (communication alone)", m->skip);
    if (m->skip && !m->out)
        return say(why, why_len, "skip %lld needs m.out (the dx rows with communication skipped; the rows sent with "
                   "compute skipped)", m->skip);
    if (!b->x || !b->gu || !b->dgu || !b->hw || !b->dr_part || !a.xin)
        return say(why, why_len, "x, gu, dgu, hw, dr_part and lsa.xin (dy's slots) must be device pointers%.0lld", 0);
    if (!!b->dw13_f32 + !!b->dw13_bf16 != 1 || !!b->dw2_f32 != !!b->dw13_f32 || !!b->dw2_bf16 != !!b->dw13_bf16)
        return say(why, why_len, "weight gradients: dw13_f32 and dw2_f32, or dw13_bf16 and dw2_bf16%.0lld", 0);
    if (b->wgrad_reduce != 0 && (b->wgrad_reduce != 1 || !b->dw13_f32))
        return say(why, why_len, "wgrad_reduce %lld: 0, or 1 with fp32 gradients (dw13_f32, dw2_f32)",
                   b->wgrad_reduce);
    if (b->wgrad_reduce && (((uintptr_t)b->dw13_f32 | (uintptr_t)b->dw2_f32 | (uintptr_t)sh.dw13_f32 |
                             (uintptr_t)sh.dw2_f32) & 15))
        return say(why, why_len, "wgrad_reduce 1: the fp32 gradients (and the shared experts') must be 16-byte "
                   "aligned (TMA)%.0lld", 0);
    if (b->ctas < 0 || b->ctas > mok_sm_count() || (b->ctas && b->ctas <= m->comm_blocks))
        return say(why, why_len, "ctas %lld: 0 (one per SM) or more than the comm blocks and at most the GPU's SMs",
                   b->ctas);
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, "ok");
    return 1;
}

extern "C" int mok_megakernel_bwd(const struct mok_mega_bwd_args *b, mok_stream_t stream)
{
    char why[256];
    if (!mok_megakernel_bwd_supports(b, why, sizeof why)) {
        fprintf(stderr, "mok-bench: backward megakernel: %s\n", why);
        return (int)cudaErrorInvalidValue;
    }
    const mok_lsa_args &a = b->m.lsa;
    const int el = a.local_experts, H = a.hidden, I = b->m.inter;
    const uint64_t cap = (uint64_t)a.capacity;
    BwdMaps maps, smaps;
    memset(&maps, 0, sizeof maps);
    memset(&smaps, 0, sizeof smaps);
    if (!encode_tile_map(&maps.dy, a.xin, cap, (uint64_t)H, kTileM) ||
        !encode_tile_map(&maps.w2t, b->m.w2, (uint64_t)el * H, (uint64_t)I, 64) ||
        !encode_tile_map(&maps.dgu, b->dgu, cap, (uint64_t)2 * I, kTileM) ||
        !encode_tile_map(&maps.w13t, b->m.w13, (uint64_t)el * 2 * I, (uint64_t)H, 64) ||
        !encode_tile_map(&maps.dyt, a.xin, cap, (uint64_t)H, 64) ||
        !encode_tile_map(&maps.hwt, b->hw, cap, (uint64_t)I, 64) ||
        !encode_tile_map(&maps.dgut, b->dgu, cap, (uint64_t)2 * I, 64) ||
        !encode_tile_map(&maps.xt, b->x, cap, (uint64_t)H, 64) ||
        (b->dw2_bf16 && !encode_tile_map(&maps.dw2c, b->dw2_bf16, (uint64_t)el * H, (uint64_t)I, 64)) ||
        (b->dw13_bf16 && !encode_tile_map(&maps.dw13c, b->dw13_bf16, (uint64_t)el * 2 * I, (uint64_t)H, 64)) ||
        (b->wgrad_reduce && !encode_tile_map_f32(&maps.dw2c, b->dw2_f32, (uint64_t)el * H, (uint64_t)I, 64)) ||
        (b->wgrad_reduce && !encode_tile_map_f32(&maps.dw13c, b->dw13_f32, (uint64_t)el * 2 * I, (uint64_t)H, 64)))
        return (int)cudaErrorInvalidValue;
    const struct mok_mega_bwd_args::mok_mega_bwd_shared &sh = b->sh;
    if (sh.inter && !encode_shared_maps(&smaps, sh, (uint64_t)a.t_max, (uint64_t)H, b->wgrad_reduce))
        return (int)cudaErrorInvalidValue;
    void (*kernel)(BwdMaps, mok_mega_bwd_args, mok_sm90_diag *, BwdMaps) =
        sh.inter ? megakernel_bwd_kernel<true> : megakernel_bwd_kernel<false>;
    const int sms = mok_sm_count(), optin = mok_smem_optin();
    mok_mega_bwd_args args = *b;
    /* the dynamic part gets the block's limit less the kernel's static shared memory (its __shared__ arrays), asked
     * once: as the forward's launcher (forward.cu dynamic_limit) */
    static size_t fixed_of[2] = {SIZE_MAX, SIZE_MAX}; /* per instance: the shared one holds its unit list too */
    size_t &fixed = fixed_of[sh.inter ? 1 : 0];
    if (fixed == SIZE_MAX) {
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess) {
            fixed = fa.sharedSizeBytes;
        } else {
            cudaGetLastError();
            fixed = 1024; /* the launch reports why; until then, a margin */
        }
    }
    const size_t limit = (size_t)(optin < kSmemLimit ? optin : kSmemLimit);
    args.m.stages = resolve_stages(&b->m, limit > fixed ? limit - fixed : 0);
    const size_t smem = smem_bytes(args.m.stages, el, 0);
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return (int)e;
    cudaStream_t s = mok_cuda_stream(stream);
    const int chunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
    if (b->m.skip != 1 || b->own_offset) /* skip 1 sends nothing: no flags, no epoch */
        megakernel_bwd_prologue_kernel<<<1, 1, 0, s>>>(b->m.skip != 1 ? a.epoch : nullptr, b->own_offset,
                                                        b->own_tokens);
    e = cudaMemsetAsync(b->m.done, 0, sizeof(int32_t) * bwd_counters(a.capacity, sh.inter ? a.t_max : 0), s);
    if (e == cudaSuccess) /* skip 1: no dispatch, every chunk counts as arrived (dy's slots hold the last one's) */
        e = b->m.skip == 1 ? cudaMemcpyAsync(a.ready, a.chunk_target, sizeof(int32_t) * (size_t)chunks,
                                             cudaMemcpyDeviceToDevice, s)
                           : cudaMemsetAsync(a.ready, 0, sizeof(int32_t) * (size_t)chunks, s);
    if (e != cudaSuccess)
        return (int)e;
    const unsigned grid = (unsigned)(b->ctas ? b->ctas : sms);
    e = mok_launch_cooperative(kernel, grid, kThreads, smem, s, maps, args, diag_record(s), smaps);
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}
