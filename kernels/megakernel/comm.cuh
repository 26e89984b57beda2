/* megakernel/comm.cuh: the comm blocks' role: the dispatch (pull, or push and the scatter of landed rows into
 * the expert slots) and the per-route and per-rank combine.
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it once, in this order:
 * layout, sync, units, comm, compute); its names live in that file's anonymous namespace. */
#pragma once

namespace {

#if MOK_SM90_DEVICE
/* dispatch=push: every peer has pushed its rows into my landing rows (their "landed" flags); copy them, with my own
 * tokens' rows, into the expert slots GEMM1's TMA reads: chunks [c0, c1), chunk c by part (c - c0) % parts,
 * releasing each chunk's ready counter by the rows copied (each warp its own, after its copies: the counter
 * reaches chunk_target once every row of the chunk is in). Local traffic at HBM rate. Who copies what:
 *   own_first = K: the compute blocks copy the own rows (kScatterOwn: no push to wait for) of the chunks of the
 *     first K experts (own_chunks) before their tiles, whose own-row units of those experts go first; the comm
 *     blocks, done pushing, copy those chunks' landed rows (kScatterRemote), then every row of the later chunks.
 *   else: the compute blocks copy the first round (one chunk each, kScatterAll) before their tiles; the comm
 *     blocks the rest, in order, ahead of the GEMM1 tiles that need them (rows are copied faster than GEMM1
 *     consumes them). */
enum { kScatterAll = 0, kScatterOwn = 1, kScatterRemote = 2 };
__device__ __forceinline__ void scatter_landed(const mok_lsa_args &a, int c0, int c1, int part, int parts, int which,
                                               struct mok_sm90_diag *diag)
{
    if (which != kScatterOwn && (int)threadIdx.x < a.nranks && (int)threadIdx.x != a.rank)
        wait_flag((const uint64_t *)ncclGetLsaPointer(
                      (ncclWindow_t)a.window,
                      a.off_flags + ((size_t)2 * MOK_LSA_MAX_RANKS + threadIdx.x) * sizeof(uint64_t), a.rank),
                  a.epoch[0], diag, (int)threadIdx.x);
    __syncthreads();
    const int used = min(a.offset[a.local_experts], a.capacity), vecs = a.hidden / 8;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = c0 + part; c < c1; c += parts) {
        int s1 = min((c + 1) * a.chunk_rows, used), copied = 0;
        for (int s = c * a.chunk_rows + warp; s < s1; s += kWarps) {
            int32_t e = a.entry[s];
            if (e < 0)
                continue; /* padding: GEMM1 computes it, nothing reads it */
            const int p = (int)((uint32_t)e >> 25);
            if ((which == kScatterOwn && p != a.rank) || (which == kScatterRemote && p == a.rank))
                continue;
            copy_row<kDispatchUnroll>(landed_row(a, p, (e >> 5) & 0xFFFFF), (uint4 *)a.xin + (size_t)s * vecs, vecs,
                                      lane);
            copied++;
        }
        release_chunk_rows(a, c, copied, lane);
    }
}

/* The scatter of either precision (the kernel's kFp8): bf16 rows, or wire rows (fp8_comm.cuh), each copied whole
 * (own_first is refused with fp8, so `which` is always kScatterAll there). */
template <bool kFp8>
__device__ __forceinline__ void scatter_rows(const mok_mega_args &m, int c0, int c1, int part, int parts, int which,
                                             struct mok_sm90_diag *diag)
{
    if constexpr (kFp8)
        scatter_landed_fp8(m, c0, c1, part, parts, diag);
    else
        scatter_landed(m.lsa, c0, c1, part, parts, which, diag);
}

/* GEMM2's column tiles per row block: 256 columns each in bf16, 128 in fp8 (layout.cuh) */
template <bool kFp8> __device__ __forceinline__ int gemm2_tiles(int hidden)
{
    return hidden / (kFp8 ? kFp8OutCols : kTileN);
}

/* send_from_gemm: the done flag goes out after this many contributions, one per consumer warpgroup of every block
 * that computes (all of them: the comm blocks join after the dispatch; with compute skipped, the compute blocks
 * count both of theirs after sending their row blocks). */
__device__ __forceinline__ int send_contributions(const mok_mega_args &m)
{
    return 2 * ((int)gridDim.x - (m.skip == 2 ? m.comm_blocks : 0));
}

/* The slots' chunk count, and how many of them the compute blocks scatter themselves (one each, first). */
__device__ __forceinline__ int slot_chunks(const mok_lsa_args &a)
{
    const int used = min(a.offset[a.local_experts], a.capacity);
    return (used + a.chunk_rows - 1) / a.chunk_rows;
}
__device__ __forceinline__ int first_round(const mok_lsa_args &a, const mok_mega_args &m)
{
    return min(slot_chunks(a), (int)gridDim.x - m.comm_blocks);
}
/* own_first = K: the chunks holding the rows of the first K experts (the last may hold some of expert K's too:
 * whoever copies a chunk's own rows copies them all, so each row is copied once). */
__device__ __forceinline__ int own_chunks(const mok_lsa_args &a, const mok_mega_args &m)
{
    const int rows = min(a.offset[min(m.own_first, a.local_experts)], a.capacity);
    return min(slot_chunks(a), (rows + a.chunk_rows - 1) / a.chunk_rows);
}


/* The per-route combine of slot s by one warp: its expert output row to the owner's combine row of its route
 * (padding slots have no owner). U vectors per lane in flight. */
template <int U> __device__ __forceinline__ void send_route_row(const mok_mega_args &m, int s, int lane)
{
    const mok_lsa_args &a = m.lsa;
    int32_t e = a.entry[s];
    if (e < 0)
        return;
    int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    uint4 *dst =
        (uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb + ((size_t)t * a.topk + j) * a.hidden * 2, p);
    copy_row<U>((const uint4 *)m.out + (size_t)s * (a.hidden / 8), dst, a.hidden / 8, lane);
}


/* ---- comm role -------------------------------------------------------------------------------------------- */
/* The comm blocks that stay for the combine; the others compute once their part of the dispatch is done. */
__device__ __forceinline__ int combine_blocks(const mok_mega_args &m)
{
    return m.combine_blocks > 0 && m.combine_blocks < m.comm_blocks ? m.combine_blocks : m.comm_blocks;
}

/* The dispatch: every routed row to the expert slots that need it (pull), or to the landing rows of the ranks
 * whose experts need it, once per rank (push; the compute blocks scatter them); kFp8: quantized as it goes
 * (push only, fp8_comm.cuh; kMx: mxfp8, else fp8_block). */
template <bool kFp8, bool kMx = false> __device__ __forceinline__ void comm_dispatch(const mok_mega_args &m)
{
    const mok_lsa_args &a = m.lsa;
    if (m.skip == 1)
        return; /* communication skipped: the compute blocks run on what the last full forward left */
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = m.comm_blocks * kWarps;
    if (a.push) {
        if constexpr (kFp8) {
            if (m.push_all)
                return; /* pushed by fp8_push_kernel on every SM before this kernel (forward.cu) */
            push_rows_fp8<kMx, true>(a, warp, nwarps, lane);
        } else {
            push_rows<kDispatchUnroll>(a, warp, nwarps, lane);
        }
        signal_done(a, 2, m.comm_blocks); /* "landed", in every window */
    } else {
        dispatch_pull_rows<kDispatchUnroll>(a, warp, nwarps, lane);
    }
}

/* The combine sends, by the first combine_blocks(m) comm blocks: per route, each slot's row to its owner as soon
 * as GEMM2 has stored the slot's row block; per rank, the partial sums once every row block is stored (a token's
 * routes here span all experts). Then the done flag to every owner. */
template <bool kFp8> __device__ __forceinline__ void comm_combine(const mok_mega_args &m, struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    if (m.skip == 1)
        return;
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = combine_blocks(m) * kWarps;
    const int target = 2 * gemm2_tiles<kFp8>(a.hidden);
    const int32_t *done2 = row_counters(m.done, 1, a.capacity);
    const int used = min(a.offset[a.local_experts], a.capacity);

    if (a.combine_per_rank) {
        if (threadIdx.x == 0)
            for (int rb = 0; rb < used / kTileM; rb++)
                wait_count(&done2[rb], target, diag, 1, rb);
        __syncthreads();
        combine_per_rank(a, warp, nwarps, lane, false); /* expert outputs, one row per route */
    } else {
        /* slots in order, so the row blocks GEMM2 finishes first (units go out in order) go first */
        int ready_rb = -1;
        for (int s = warp; s < used; s += nwarps) {
            int rb = s / kTileM;
            if (rb != ready_rb) {
                if (lane == 0)
                    wait_count(&done2[rb], target, diag, 1, rb);
                __syncwarp();
                ready_rb = rb;
            }
            send_route_row<kDispatchUnroll>(m, s, lane);
        }
    }
    signal_done(a, 1, combine_blocks(m));
}
#endif

} // namespace
