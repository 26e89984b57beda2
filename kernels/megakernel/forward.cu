/* megakernel_fwd: dispatch, GEMM1 + SwiGLU, GEMM2 and the combine sends of one forward in one persistent,
 * cooperative launch (kernels/megakernel.h says what comes before and after it).
 *
 * Block roles, by blockIdx (one block of 384 threads per SM):
 *   [0, comm_blocks)  comm: 12 copy warps each. Dispatch (lsa_device.cuh, 8 vectors in flight per lane): pull each
 *                     row into every local expert slot, or push each own row once per destination rank into its
 *                     landing row and flag "landed"; then the landed rows are copied into the slots (the compute
 *                     blocks one chunk each before their tiles, the comm blocks the rest, in order). Then the
 *                     combine, by the first combine_blocks (the others join the compute blocks): per route, each
 *                     slot's row goes to its owner as soon as GEMM2 has stored the slot's 128-row block; per rank,
 *                     the partial sums once every row block is stored (a token's routes here span all experts).
 *                     Then the done flag to every owner.
 *   [comm_blocks, grid) compute: the tile loop of gemm_sm90 (warp-specialized: one TMA producer thread, two wgmma
 *                     consumer warpgroups, a shared-memory ring on mbarriers) over one list of units handed out by
 *                     a ticket: every GEMM1 tile (128 rows x 128 h columns, SwiGLU fused), then every GEMM2 tile
 *                     (128 rows x 256 output columns). A GEMM1 tile's producer waits for the dispatch's ready
 *                     counters of its rows; a GEMM2 tile's producer waits until its row block's h is complete (both
 *                     consumer warpgroups of all I/128 GEMM1 tiles counted themselves). After storing its half tile
 *                     (TMA store, waited), a consumer warpgroup's leader counts it in done[job][row block] (release).
 *                     With send_from_gemm (the kSend kernel) GEMM2's rows go instead straight from the epilogue to
 *                     their owners' combine rows (16-byte stores from the registers), no comm block combines, and
 *                     every comm block joins the compute blocks once its share of the dispatch is done.
 * Order and progress: tickets go out in list order, so every GEMM1 unit is taken before any GEMM2 unit; GEMM1 waits
 * only on the dispatch, GEMM2 only on GEMM1 units already taken by running blocks, the comm blocks' combine only on
 * GEMM2; every block is resident (cooperative launch), so every wait is eventually satisfied. Every wait gives up
 * after ~10 s with a record in mapped host memory (gemm_sm90's failure record, printed at exit; no printf in this
 * kernel: a call in a kernel makes ptxas serialize its wgmmas).
 *
 * skip (the breakdown): 1 runs the compute blocks alone on what the last full forward left in the slots, 2 runs the
 * communication alone (compute blocks only count GEMM2 as done), so a report can say how much communication stays
 * exposed in the full kernel.
 *
 * The owner's weighted sum stays a stream-ordered kernel after this one (mok_lsa_reduce): it needs every rank's
 * rows, i.e. a wait on the other GPUs' combine at the very end, and as a separate kernel it takes all SMs for the
 * few microseconds it needs instead of whatever blocks finish last here.
 *
 * This file composes the parts (one translation unit): megakernel/layout.cuh (tile shape, shared memory, counters,
 * tensor maps), sync.cuh (the counters' waits), units.cuh (the ticket's unit list), comm.cuh (the comm role),
 * compute.cuh (the compute role on the GEMM core, kernels/gemm/sm90_core.cuh, and its epilogues); here: the kernel,
 * which gives each block its role, and the host launcher. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdio.h>
#include <string.h>

#include "common/common.cuh"
#include "gemm/sm90_core.cuh"
#include "gemm/sm90_fp8.cuh"
#include "gemm/sm90_mx_rega.cuh"
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
#include "megakernel/fp8_compute.cuh"
#include "megakernel/mx_expand.cuh"
#include "megakernel/swap_tail.cuh"
#include "megakernel/gather.cuh"

namespace {

/* kSend: m.send_from_gemm (the GEMM2 epilogue stores rows straight to their owners; no comm block combines). Two
 * kernels, so that each carries only its own two epilogues: with the choice made at run time in one kernel, ptxas
 * reloaded 68 bytes from the stack (over kernel_resources' 64); as two kernels, 60 and 52 (as of 993df70).
 * kSplit: m.split_half (compute.cuh: split_half_unit), kernels of their own too, so the instances without it keep
 * their machine code. */
template <bool kSend, bool kSplit, bool kSave = false, bool kFp8 = false, bool kMx = false, bool kFp8Shared = false,
          bool kExpand = false, bool kSwap = false, bool kWide = false, bool kRegA = false, bool kGather = false>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_fwd_kernel(const __grid_constant__ Maps maps, const __grid_constant__ mok_mega_args m,
                          struct mok_sm90_diag *diag)
{
#if MOK_SM90_DEVICE
    if ((int)blockIdx.x < m.comm_blocks) {
        comm_dispatch<kFp8, kMx>(m);
        if (kGather && m.skip == 2 && blockIdx.x == 0 && threadIdx.x == 0) /* communication alone: the kernel ends */
            wait_landed(m.lsa, diag); /* after the peers' rows are in, as gather 0's scatter waits for them */
        if (m.lsa.push && m.skip != 1 && !kGather) { /* own_first: the landed rows of the first experts' chunks,
                                                      * then every row of the others; else the chunks past the
                                                      * first round (kGather: GEMM1 reads the landed rows) */
            if (kFp8) {
                scatter_rows<kFp8>(m, first_round(m.lsa, m), slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks,
                                   kScatterAll, diag);
            } else if (m.own_first) {
                const int own = own_chunks(m.lsa, m);
                scatter_landed(m.lsa, 0, own, (int)blockIdx.x, m.comm_blocks, kScatterRemote, diag);
                scatter_landed(m.lsa, own, slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks, kScatterAll, diag);
            } else
                scatter_landed(m.lsa, first_round(m.lsa, m), slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks,
                               kScatterAll, diag);
        }
        if ((int)blockIdx.x < combine_blocks(m) && !kSend) {
            comm_combine<kFp8 && !kExpand && !kWide && !kRegA>(m, diag); /* GEMM2's tiles: 128 columns, or 256 */
        } else if (m.skip != 2) { /* its part of the dispatch done: one more compute block from now on */
            __syncthreads();
            compute_role<kSend, kSplit, kSave, kFp8, kMx, kFp8Shared, kExpand, kSwap, kWide, kRegA, kGather>(
                maps, m, 0, 0, true, diag);
        }
    } else {
        compute_role<kSend, kSplit, kSave, kFp8, kMx, kFp8Shared, kExpand, kSwap, kWide, kRegA, kGather>(
            maps, m, (int)blockIdx.x - m.comm_blocks, (int)gridDim.x - m.comm_blocks, false, diag);
    }
#else
    __trap(); /* built for a target without wgmma: the launcher refuses before getting here */
#endif
}

/* push_all: the FP8 push on every SM, stream-ordered before the fused kernel (whose comm blocks then skip theirs).
 * FP8's scatter starts only once every rank's rows have landed, so with the comm blocks alone pushing, the compute
 * blocks wait out the whole push. A kernel of its own, not a part of the fused one: there, the push's registers
 * made ptxas spill 120-256 bytes in the wide fp8_block instances (the fused kernel shares one allocation).
 * Nothing here waits before writing into a peer's landing rows: its previous forward is done with them because this
 * rank's schedule, earlier on the stream, waited for every peer's routes of this epoch (lsa_pull_tables_kernel),
 * which a peer publishes only after its previous fused kernel and sum (libmok's mok_route refuses otherwise; the
 * order holds with libmok's calls on one stream per rank, as libmok.h asks). The bf16 push relies on the same
 * order. */
constexpr int kPushThreads = 512;
template <bool kMx> __global__ void __launch_bounds__(kPushThreads) fp8_push_kernel(const __grid_constant__ mok_mega_args m)
{
#if MOK_SM90_DEVICE
    const int warps = kPushThreads / 32;
    push_rows_fp8<kMx>(m.lsa, (int)(blockIdx.x * warps + threadIdx.x / 32), (int)gridDim.x * warps,
                       (int)threadIdx.x % 32);
    signal_done(m.lsa, 2, (int)gridDim.x); /* "landed", in every window */
#endif
}

using MegaKernel = void (*)(const Maps, const mok_mega_args, struct mok_sm90_diag *);

/* An FP8 instance: send_from_gemm x mxfp8 x shared experts (kFp8Shared: the shared MLP's bf16 tiles, an instance
 * of their own so that the others keep their registers: with them compiled in, fp8_block's instances spilled 40 /
 * 116 bytes against 36 / 88 without). */
template <bool kMx> MegaKernel fp8_kernel_for(const mok_mega_args *m)
{
    if (kMx && m->mx_scheme == 3) { /* the rows into the consumers' registers: gemm/sm90_mx_rega.cuh */
        constexpr bool f = false, t = true;
        if (m->shared_inter)
            return m->send_from_gemm ? megakernel_fwd_kernel<t, f, f, t, t, t, f, f, f, t>
                                     : megakernel_fwd_kernel<f, f, f, t, t, t, f, f, f, t>;
        return m->send_from_gemm ? megakernel_fwd_kernel<t, f, f, t, t, f, f, f, f, t>
                                 : megakernel_fwd_kernel<f, f, f, t, t, f, f, f, f, t>;
    }
    if (kMx && m->mx_scheme == 1) { /* scheme (b): mx_expand.cuh */
        if (m->shared_inter)
            return m->send_from_gemm ? megakernel_fwd_kernel<true, false, false, true, true, true, true>
                                     : megakernel_fwd_kernel<false, false, false, true, true, true, true>;
        return m->send_from_gemm ? megakernel_fwd_kernel<true, false, false, true, true, false, true>
                                 : megakernel_fwd_kernel<false, false, false, true, true, false, true>;
    }
    if (!kMx && m->fp8_tile_n == 256) { /* fp8_block on the bf16 kernel's tiles (fp8_compute.cuh Fp8Tile) */
        constexpr bool f = false, t = true;
        if (m->shared_inter)
            return m->send_from_gemm ? megakernel_fwd_kernel<t, f, f, t, f, t, f, f, t>
                                     : megakernel_fwd_kernel<f, f, f, t, f, t, f, f, t>;
        return m->send_from_gemm ? megakernel_fwd_kernel<t, f, f, t, f, f, f, f, t>
                                 : megakernel_fwd_kernel<f, f, f, t, f, f, f, f, t>;
    }
    if (m->shared_inter)
        return m->send_from_gemm ? megakernel_fwd_kernel<true, false, false, true, kMx, true>
                                 : megakernel_fwd_kernel<false, false, false, true, kMx, true>;
    return m->send_from_gemm ? megakernel_fwd_kernel<true, false, false, true, kMx>
                             : megakernel_fwd_kernel<false, false, false, true, kMx>;
}

/* mxfp8 scheme (b): mx_expand.cuh's instances */
bool expands(const mok_mega_args *m) { return m->fp8 == 2 && m->mx_scheme == 1; }

/* fp8_block on the bf16 kernel's 128 x 256 tiles (fp8_compute.cuh Fp8Tile) */
bool wide(const mok_mega_args *m) { return m->fp8 == 1 && m->fp8_tile_n == 256; }

/* mxfp8 mx_scheme 3: the bf16 kernel's tiles, A's e4m3 rows expanded into the consumers' registers, B the weights'
 * MX values in bf16 (m->w13, m->w2, K permuted within each 64-K block) */
bool rega(const mok_mega_args *m) { return m->fp8 == 2 && m->mx_scheme == 3; }

/* The FP8 instances on the bf16 kernel's 128 x 256 tiles and 48 KiB slots besides scheme (b)'s (layout.cuh
 * smem_bytes' `wide`) */
bool bf16_slots(const mok_mega_args *m) { return wide(m) || rega(m); }

/* The instance a configuration runs (send_from_gemm x split_half, or x saving gu: kSave, x gather (x split_half),
 * x swap_tail, or x fp8: fp8_kernel_for). */
MegaKernel kernel_for(const mok_mega_args *m)
{
    if (m->fp8)
        return m->fp8 == 2 ? fp8_kernel_for<true>(m) : fp8_kernel_for<false>(m);
    if (m->gu)
        return m->send_from_gemm ? megakernel_fwd_kernel<true, false, true> : megakernel_fwd_kernel<false, false, true>;
    if (m->gather) { /* gather.cuh, with or without split_half */
        constexpr bool f = false, t = true;
        if (m->split_half)
            return m->send_from_gemm ? megakernel_fwd_kernel<t, t, f, f, f, f, f, f, f, f, t>
                                     : megakernel_fwd_kernel<f, t, f, f, f, f, f, f, f, f, t>;
        return m->send_from_gemm ? megakernel_fwd_kernel<t, f, f, f, f, f, f, f, f, f, t>
                                 : megakernel_fwd_kernel<f, f, f, f, f, f, f, f, f, f, t>;
    }
    if (m->split_half)
        return m->send_from_gemm ? megakernel_fwd_kernel<true, true> : megakernel_fwd_kernel<false, true>;
    if (m->swap_tail) /* swap_tail.cuh */
        return m->send_from_gemm ? megakernel_fwd_kernel<true, false, false, false, false, false, false, true>
                                 : megakernel_fwd_kernel<false, false, false, false, false, false, false, true>;
    return m->send_from_gemm ? megakernel_fwd_kernel<true, false> : megakernel_fwd_kernel<false, false>;
}

int say(char *why, int why_len, const char *msg, long long v)
{
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, msg, v);
    return 0;
}

size_t done_counters(const mok_mega_args *m)
{
    return counters(m->lsa.capacity, m->lsa.t_max, m->shared_inter) +
           (m->fp8 == 1 ? fp8_pair_counters(m->lsa.capacity, m->inter) : 0);
}

/* The static shared memory of a kernel instance (its __shared__ arrays: the combine rows' bases, the slots' units,
 * the unit list), asked once per instance: the dynamic part may take only what is left of the block's limit. */
size_t static_smem(MegaKernel k)
{
    static struct {
        MegaKernel k;
        size_t bytes;
    } known[48];
    for (int i = 0; i < 48; i++) {
        if (known[i].k == k)
            return known[i].bytes;
        if (!known[i].k) {
            cudaFuncAttributes fa;
            if (cudaFuncGetAttributes(&fa, k) != cudaSuccess) {
                cudaGetLastError();
                return 1024; /* the launch reports why; until then, a margin */
            }
            known[i].k = k, known[i].bytes = fa.sharedSizeBytes;
            return fa.sharedSizeBytes;
        }
    }
    return 1024;
}

/* What the dynamic shared memory may take: the opt-in limit (at most kSmemLimit) less the instance's static part. */
size_t dynamic_limit(const mok_mega_args *m, int optin)
{
    const size_t limit = (size_t)(optin < kSmemLimit ? optin : kSmemLimit), fixed = static_smem(kernel_for(m));
    return limit > fixed ? limit - fixed : 0;
}

/* The pipeline depth: as asked, or the deepest that fits next to the 32 KiB C staging. Scheme (b) also has its
 * landing ring: as asked, or as deep as fits up to kMxLandMax beside two ring stages (or the asked ones), and the
 * ring then as deep as still fits (gemm/sm90_mx_expand.cuh says why the landing ring comes first). */
struct Ring {
    int stages, land; /* the ring's stages; scheme (b)'s landing stages (0 in the other instances) */
};

Ring resolve_ring(const mok_mega_args *m, size_t limit)
{
    auto fits = [&](int s, int l) {
        return smem_bytes(s, m->lsa.local_experts, m->own_first, m->fp8, l, bf16_slots(m)) <= limit;
    };
    Ring r = {m->stages, expands(m) ? m->land_stages : 0};
    if (expands(m) && r.land == 0) {
        r.land = kMxLandMax;
        while (r.land > kMxLandMin && !fits(r.stages ? r.stages : 2, r.land))
            r.land--;
    }
    if (r.stages == 0) {
        r.stages = 8;
        while (r.stages > 2 && !fits(r.stages, r.land))
            r.stages--;
    }
    return r;
}

} // namespace

extern "C" int mok_megakernel_supports(const struct mok_mega_args *m, char *why, int why_len)
{
    const mok_lsa_args &a = m->lsa;
    int dev = 0, major = 0, sms = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError();
        return say(why, why_len, "cannot query the current device%.0lld", 0);
    }
    if (major != 9)
        return say(why, why_len, "sm_90a only (this GPU is sm_%lld0)", major);
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel_for(m)) != cudaSuccess) {
        cudaGetLastError();
        return say(why, why_len, "no sm_90a image of the megakernel in this build%.0lld", 0);
    }
    if (fa.numRegs * kThreads < 128 * kProducerRegs + 256 * kConsumerRegs)
        return say(why, why_len, "the megakernel starts with %lld registers per thread; setmaxnreg needs 168",
                   fa.numRegs);
    if (a.bulk_copies || a.landing != a.push)
        return say(why, why_len, "the megakernel pulls rows into expert slots (layout=slots, dispatch=pull) or has "
                   "them pushed to landing rows (layout=landing, dispatch=push), copy=warp%.0lld", 0);
    if (a.tile_rows != kTileM)
        return say(why, why_len, "tile_rows %lld: the megakernel's row blocks are 128 rows", a.tile_rows);
    if (a.hidden % kTileN || m->inter % (kTileN / 2))
        return say(why, why_len, "hidden must be a multiple of 256 and intermediate of 128 (hidden %lld)", a.hidden);
    if (a.local_experts < 1 || a.local_experts > kMaxGroups)
        return say(why, why_len, "local experts %lld: 1..1024", a.local_experts);
    if (m->comm_blocks < 1 || m->comm_blocks >= sms)
        return say(why, why_len, "comm SMs %lld: at least 1 and fewer than the GPU's SMs", m->comm_blocks);
    if (m->shared_inter < 0 || m->shared_inter % (kTileN / 2) ||
        (m->shared_inter && (!m->x_local || !m->sw13 || !m->sw2 || !m->sh || !m->sy)))
        return say(why, why_len, "shared_inter %lld: 0 or a multiple of 128, with x_local, sw13, sw2, sh, sy",
                   m->shared_inter);
    if (m->send_from_gemm < 0 || m->send_from_gemm > 1 || (m->send_from_gemm && a.combine_per_rank))
        return say(why, why_len, "send_from_gemm %lld: 0, or 1 with the per-route combine (GEMM2's epilogue sends "
                   "one row per route)", m->send_from_gemm);
    if (m->own_first < 0 || m->own_first > MOK_OWN_FIRST_MAX || (m->own_first && !a.push))
        return say(why, why_len, "own_first %lld: 0, or 1..65536 experts with dispatch=push (the own rows of the first "
                   "own_first local experts are copied before the push lands and their GEMM1 tiles go first)",
                   m->own_first);
    static_assert(MOK_OWN_FIRST_MAX == 65536, "the message above names the limit");
    if (a.hidden / kTileN > 255 || m->inter / (kTileN / 2) > 255 || m->shared_inter / (kTileN / 2) > 255 ||
        a.capacity / kTileM >= (1 << 21))
        return say(why, why_len, "hidden %lld, intermediate, shared intermediate or capacity too large for the unit "
                   "packing (at most 255 column tiles of each GEMM and 2^21 row blocks)", a.hidden);
    if (m->lockstep < 0 || m->lockstep > 1)
        return say(why, why_len, "lockstep %lld: 0 or 1 (a unit starts once the previous wave's units have)",
                   m->lockstep);
    if (m->combine_blocks < 0 || m->combine_blocks > m->comm_blocks)
        return say(why, why_len, "combine SMs %lld: 0 (all comm SMs) up to the comm SMs (the others compute after "
                   "the dispatch)", m->combine_blocks);
    if (m->skip < 0 || m->skip > 2)
        return say(why, why_len, "skip %lld: 0, 1 (communication) or 2 (compute)", m->skip);
    if (m->gu && m->shared_inter && !m->sgu)
        return say(why, why_len, "gu with shared experts (shared_inter %lld): sgu too (the shared GEMM1's gate and up "
                   "columns)", m->shared_inter);
    if (m->gemm1_only && (!m->gu || !m->send_from_gemm))
        return say(why, why_len, "gemm1_only %lld (the backward's recompute): with gu and send_from_gemm 1",
                   m->gemm1_only);
    if (m->gu && m->split_half)
        return say(why, why_len, "gu (the backward's saved activations) with split_half %lld: not implemented (the "
                   "split unit's epilogue stores h only)", m->split_half);
    if (m->fp8 < 0 || m->fp8 > 2)
        return say(why, why_len, "fp8 %lld: 0 (bf16), 1 (fp8_block) or 2 (mxfp8)", m->fp8);
    if (m->fp8 && (!a.push || m->gu || m->gemm1_only || m->split_half || m->own_first))
        return say(why, why_len, "fp8: the forward with dispatch=push (it quantizes the rows it sends), without saved "
                   "activations, split_half or own_first (not implemented; own_first %lld)", m->own_first);
    if (m->push_all < 0 || m->push_all > 1 || (m->push_all && !m->fp8))
        return say(why, why_len, "push_all %lld: 0, or 1 with fp8 (every block takes part in the quantizing push; the "
                   "bf16 push leaves a rank's own rows in place)", m->push_all);
    if (m->fp8 && !rega(m) &&
        (!m->xq || !m->hq || !m->hs || !m->w13q || !m->w2q || (m->fp8 == 1 && (!m->w13s || !m->w2s)) ||
         (m->fp8 == 2 && (!m->w13mx || !m->w2mx))))
        return say(why, why_len, "fp8 needs xq, hq, hs, w13q, w2q and the weights' scales (fp8_block: w13s, w2s; "
                   "mxfp8: w13mx, w2mx)%.0lld", 0);
    if (rega(m) && (!m->xq || !m->hq || !m->hs || !m->w13 || !m->w2))
        return say(why, why_len, "mxfp8 mx_scheme 3 needs xq, hq, hs and w13, w2 (the weights' MX values in bf16, K "
                   "permuted within each 64-K block: mok_expand_mxfp8_bf16_k64perm)%.0lld", 0);
    if (m->fp8 && !expands(m) && !bf16_slots(m) &&
        (m->inter / kFp8HCols > 255 || m->shared_inter / kFp8HCols > 255 || a.hidden / kFp8OutCols > 255))
        return say(why, why_len, "fp8: intermediate, shared intermediate or hidden (%lld) too large for the unit "
                   "packing (at most 255 column tiles of 64 and 128)", a.hidden);
    if (m->swap_tail < 0 || m->swap_tail > 1 || (m->swap_tail && (m->fp8 || m->gu || m->split_half)))
        return say(why, why_len, "swap_tail %lld: 0, or 1 in the bf16 forward without saved activations (gu) or "
                   "split_half (an expert's last row block of <= 112 rows with its tokens as wgmma's N)",
                   m->swap_tail);
    if (m->gather < 0 || m->gather > 1 ||
        (m->gather && (m->fp8 || m->gu || m->gemm1_only || !a.push || m->own_first || m->swap_tail)))
        return say(why, why_len, "gather %lld: 0, or 1 in the bf16 forward with dispatch=push, without saved "
                   "activations (gu), gemm1_only, own_first or swap_tail (GEMM1 reads the rows where they landed; "
                   "nothing fills the expert slots those read)", m->gather);
    if ((m->fp8_tile_n != 0 && m->fp8_tile_n != 128 && m->fp8_tile_n != 256) || (m->fp8_tile_n == 256 && m->fp8 != 1))
        return say(why, why_len, "fp8_tile_n %lld: 0 or 128 (128 x 128 fp8 tiles), or 256 with fp8 1 (fp8_block on "
                   "the bf16 kernel's 128 x 256 tiles)", m->fp8_tile_n);
    if (m->mx_scheme < 0 || m->mx_scheme > 3 || m->mx_scheme == 2 || (m->mx_scheme && m->fp8 != 2))
        return say(why, why_len, "mx_scheme %lld: 0 (mxfp8 promoted per 32 K on 128 x 128 tiles), or with fp8 2 "
                   "(mxfp8) 1 (expanded to bf16 in shared memory, mx_expand.cuh) or 3 (the rows into the consumers' "
                   "registers, the weights in bf16: gemm/sm90_mx_rega.cuh)", m->mx_scheme);
    if (m->stages && (m->stages < 2 || m->stages > 8))
        return say(why, why_len, "stages %lld: 0 (as many as fit) or 2..8", m->stages);
    if (m->land_stages && (!expands(m) || m->land_stages < kMxLandMin || m->land_stages > kMxLandMax))
        return say(why, why_len, "land_stages %lld: 0 (as many as fit), or 2..4 with mxfp8's mx_scheme 1 (its landing "
                   "ring)", m->land_stages);
    const size_t limit = dynamic_limit(m, optin);
    const Ring ring = resolve_ring(m, limit);
    if (smem_bytes(ring.stages, a.local_experts, m->own_first, m->fp8, ring.land, bf16_slots(m)) > limit)
        return say(why, why_len, "shared memory: %lld ring stages (48 KiB each in bf16, mxfp8's scheme (b) and "
                   "fp8_block's 128 x 256 tiles, 32 in fp8_block's 128 x 128, 32.5 in mxfp8) + 32 KiB staging (+ 24.5 "
                   "KiB per landing stage in scheme (b)) do not fit", ring.stages);
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, "ok");
    return 1;
}

extern "C" size_t mok_megakernel_counters(int capacity, int t_max, int shared_inter)
{
    return counters(capacity, t_max, shared_inter);
}

extern "C" size_t mok_megakernel_fp8_counters(int capacity, int inter) { return fp8_pair_counters(capacity, inter); }

extern "C" int mok_megakernel_fp8_row_bytes(int hidden) { return fp8_row_bytes(hidden); }

extern "C" void mok_megakernel_prepare(mok_stream_t stream) { diag_record(mok_cuda_stream(stream)); }

extern "C" int mok_megakernel_fwd(const struct mok_mega_args *m, mok_stream_t stream)
{
    char why[256];
    if (!mok_megakernel_supports(m, why, sizeof why)) {
        fprintf(stderr, "mok-bench: megakernel: %s\n", why);
        return (int)cudaErrorInvalidValue;
    }
    const mok_lsa_args &a = m->lsa;
    const int el = a.local_experts, H = a.hidden, I = m->inter;
    Maps maps;
    memset(&maps, 0, sizeof maps);
    const int SI = m->shared_inter;
    /* the shared MLP's tiles are bf16 in either kernel; FP8's 128 x 128 tiles take w13 in 64-row and w2 in 128-row
     * boxes (fp8_compute.cuh shared_unit_bf16) */
    /* scheme (b), wide and mx_scheme 3: the bf16 tiles */
    const bool ex = expands(m), tiles128 = m->fp8 && !ex && !bf16_slots(m);
    const uint32_t sbox13 = tiles128 ? kFp8HCols : kTileN / 2, sbox2 = tiles128 ? kFp8OutCols : kTileN;
    if (SI && (!encode_tile_map(&maps.sx, m->x_local, (uint64_t)a.t_max, (uint64_t)H, kTileM) ||
               !encode_tile_map(&maps.sw13, m->sw13, (uint64_t)2 * SI, (uint64_t)H, sbox13) ||
               !encode_tile_map(&maps.shc, m->sh, (uint64_t)a.t_max, (uint64_t)SI, 64) ||
               !encode_tile_map(&maps.sha, m->sh, (uint64_t)a.t_max, (uint64_t)SI, kTileM) ||
               !encode_tile_map(&maps.sw2, m->sw2, (uint64_t)H, (uint64_t)SI, sbox2) ||
               !encode_tile_map(&maps.syc, m->sy, (uint64_t)a.t_max, (uint64_t)H, 64)))
        return (int)cudaErrorInvalidValue;
    /* fp8: the operands' maps over e4m3 bytes, 128 bytes (K) per box row as bf16's; w13 in 64-row boxes (a gate or
     * an up half of a tile), w2 in 128-row ones (fp8_compute.cuh) */
    /* the FP8 tiles' e4m3 boxes of 128 bytes of K: w13's gate or up half and w2's rows of a tile (128 x 128: 64
     * and 128, wide: 128 and 256) */
    const uint32_t box13 = wide(m) ? kTileN / 2 : kFp8HCols, box2 = wide(m) ? kTileN : kFp8OutCols;
    if ((tiles128 || wide(m)) &&
        (!encode_tile_map_e4m3(&maps.x, m->xq, (uint64_t)a.capacity, (uint64_t)H, kTileM,
                               (uint64_t)fp8_row_bytes(H)) ||
         !encode_tile_map_e4m3(&maps.w13, m->w13q, (uint64_t)el * 2 * I, (uint64_t)H, box13) ||
         !encode_tile_map_e4m3(&maps.ha, m->hq, (uint64_t)a.capacity, (uint64_t)I, kTileM) ||
         !encode_tile_map_e4m3(&maps.w2, m->w2q, (uint64_t)el * H, (uint64_t)I, box2)))
        return (int)cudaErrorInvalidValue;
    if (tiles128 && m->fp8 == 2 &&
        (!encode_mx_scale_tile_map(&maps.bs13, m->w13mx, (uint64_t)el * 2 * I / 64, (uint64_t)H / 128) ||
         !encode_mx_scale_tile_map(&maps.bs2, m->w2mx, (uint64_t)el * H / 64, (uint64_t)I / 128)))
        return (int)cudaErrorInvalidValue;
    /* scheme (b): the landing boxes, 64 bytes of K per row (64B swizzle), of the bf16 tiles' rows: A 128, w13's gate
     * or up half 128, w2 256; the B scales one 64-K block of the tile's four 64-row blocks per box */
    if (ex && (!encode_tile_map_e4m3(&maps.x, m->xq, (uint64_t)a.capacity, (uint64_t)H, kTileM,
                                     (uint64_t)fp8_row_bytes(H), true) ||
               !encode_tile_map_e4m3(&maps.w13, m->w13q, (uint64_t)el * 2 * I, (uint64_t)H, kTileN / 2, 0, true) ||
               !encode_tile_map_e4m3(&maps.ha, m->hq, (uint64_t)a.capacity, (uint64_t)I, kTileM, 0, true) ||
               !encode_tile_map_e4m3(&maps.w2, m->w2q, (uint64_t)el * H, (uint64_t)I, kTileN, 0, true) ||
               !encode_mx_scale_tile_map(&maps.bs13, m->w13mx, (uint64_t)el * 2 * I / 64, (uint64_t)H / 128,
                                         kTileN / 64) ||
               !encode_mx_scale_tile_map(&maps.bs2, m->w2mx, (uint64_t)el * H / 64, (uint64_t)I / 128, kTileN / 64)))
        return (int)cudaErrorInvalidValue;
    /* mx_scheme 3: A's e4m3 rows in scheme (b)'s landing boxes (into the slots), B in bf16 as the bf16 kernel's */
    if (rega(m) && (!encode_tile_map_e4m3(&maps.x, m->xq, (uint64_t)a.capacity, (uint64_t)H, kTileM,
                                          (uint64_t)fp8_row_bytes(H), true) ||
                    !encode_tile_map_e4m3(&maps.ha, m->hq, (uint64_t)a.capacity, (uint64_t)I, kTileM, 0, true) ||
                    !encode_tile_map(&maps.w13, m->w13, (uint64_t)el * 2 * I, (uint64_t)H, kTileN / 2) ||
                    !encode_tile_map(&maps.w2, m->w2, (uint64_t)el * H, (uint64_t)I, kTileN)))
        return (int)cudaErrorInvalidValue;
    if ((!m->fp8 && (!encode_tile_map(&maps.x, a.xin, (uint64_t)a.capacity, (uint64_t)H, kTileM) ||
                     !encode_tile_map(&maps.w13, m->w13, (uint64_t)el * 2 * I, (uint64_t)H, kTileN / 2) ||
                     !encode_tile_map(&maps.ha, m->h, (uint64_t)a.capacity, (uint64_t)I, kTileM) ||
                     !encode_tile_map(&maps.w2, m->w2, (uint64_t)el * H, (uint64_t)I, kTileN))) ||
        !encode_tile_map(&maps.hc, m->h, (uint64_t)a.capacity, (uint64_t)I, 64) ||
        !encode_tile_map(&maps.oc, m->out, (uint64_t)a.capacity, (uint64_t)H, 64) ||
        (m->gu && !encode_tile_map(&maps.guc, m->gu, (uint64_t)a.capacity, (uint64_t)2 * I, 64)) ||
        (m->gu && SI && !encode_tile_map(&maps.sguc, m->sgu, (uint64_t)a.t_max, (uint64_t)2 * SI, 64)))
        return (int)cudaErrorInvalidValue;
    const int sms = mok_sm_count(), optin = mok_smem_optin(); /* asked once per process (common.cuh) */
    mok_mega_args args = *m;
    const Ring ring = resolve_ring(m, dynamic_limit(m, optin));
    args.stages = ring.stages, args.land_stages = ring.land;
    size_t smem = smem_bytes(args.stages, el, m->own_first, m->fp8, ring.land, bf16_slots(m));
    auto kernel = kernel_for(m);
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess)
        return (int)e;
    cudaStream_t s = mok_cuda_stream(stream);
    /* the row-block counters start from zero every forward (a memset node when captured) */
    e = cudaMemsetAsync(m->done, 0, sizeof(int32_t) * done_counters(m), s);
    if (e == cudaSuccess && m->skip == 1) /* no dispatch: every chunk counts as arrived */
        e = cudaMemcpyAsync(a.ready, a.chunk_target,
                            sizeof(int32_t) * (size_t)((a.capacity + a.chunk_rows - 1) / a.chunk_rows),
                            cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess)
        return (int)e;
    if (m->fp8 && m->push_all && a.push && m->skip != 1) { /* two blocks per SM: 32 warps, a token row each */
        auto push = m->fp8 == 2 ? fp8_push_kernel<true> : fp8_push_kernel<false>;
        push<<<(unsigned)(2 * sms), kPushThreads, 0, s>>>(args);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return (int)e;
    }
    /* blocks wait on each other: all resident, or the launch fails */
    e = mok_launch_cooperative(kernel, (unsigned)sms, kThreads, smem, s, maps, args, diag_record(s));
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}
