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
 * few microseconds it needs instead of whatever blocks finish last here. */
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

namespace {

constexpr int kTileN = 256;            /* accumulator columns per tile: GEMM1 128 gate + 128 up, GEMM2 256 */
constexpr int kMaxGroups = 1024;
constexpr int kSlotBBytes = kTileN * kRowBytes;
/* C staging: 128 rows x 128 bf16 columns, what one GEMM1 + SwiGLU tile stores. GEMM2's 256 columns go out in two
 * halves through it: 32 KiB of staging instead of 64 leaves room for a fourth 48 KiB stage of the ring, which both
 * GEMMs use (a second TMA store round per GEMM2 tile costs less than a shallower ring for all of them). */
constexpr int kStageCols = kTileN / 2;
constexpr int kStageBytes = kTileM * kStageCols * 2;
constexpr int kSmemLimit = 227 * 1024;

/* [align slack][A slots][B slots][C staging][full barriers][empty barriers][row-block prefix], and with own_first
 * [own_pack][own_start] (only then: they would cost a ring stage at some expert counts) */
size_t smem_bytes(int stages, int groups, int own_first)
{
    return 1024 + (size_t)stages * (kSlotABytes + kSlotBBytes) + kStageBytes + 2 * (size_t)stages * 8 +
           (size_t)(groups + 1) * 4 + (own_first ? (size_t)(2 * groups + 1) * 4 : 0);
}

/* mok_mega_args.done: [0] the unit ticket, [1] units started (lockstep), then per row block GEMM1's and GEMM2's
 * counters over the slots, then the shared GEMM1's over the own tokens (row_counters). The ticket first: its
 * address is then the kernel parameter itself, which costs the producer (beside consumers at their register
 * limit) no register to keep. */
size_t counters(int capacity, int t_max, int shared_inter)
{
    return 2 + 2 * (size_t)(capacity / kTileM) + (shared_inter ? (size_t)t_max / kTileM + 1 : 0);
}

/* The tensor maps, as kernel parameters (__grid_constant__: TMA reads them where they are). */
struct Maps {
    CUtensorMap x;   /* xin [capacity][H], A of GEMM1, 128-row boxes */
    CUtensorMap w13; /* [EL * 2I][H], 128-row boxes (gate half, up half) */
    CUtensorMap hc;  /* h [capacity][I] as GEMM1's C: 64 x 64 store boxes */
    CUtensorMap ha;  /* h as GEMM2's A: 128-row boxes */
    CUtensorMap w2;  /* [EL * H][I], 256-row boxes */
    CUtensorMap oc;  /* out [capacity][H] as GEMM2's C: 64 x 64 store boxes */
    /* shared experts (shared_inter > 0; unused otherwise) */
    CUtensorMap sx;   /* this forward's own token rows [t_max][H], A of the shared GEMM1, 128-row boxes */
    CUtensorMap sw13; /* [2 SI][H], 128-row boxes */
    CUtensorMap shc;  /* sh [t_max][SI] as the shared GEMM1's C: 64 x 64 store boxes */
    CUtensorMap sha;  /* sh as the shared GEMM2's A: 128-row boxes */
    CUtensorMap sw2;  /* [H][SI], 256-row boxes */
    CUtensorMap syc;  /* sy [t_max][H] as the shared GEMM2's C: 64 x 64 store boxes */
};

#if MOK_SM90_DEVICE
constexpr int kMaxStages = 8;

__device__ __forceinline__ int32_t *row_counters(int32_t *done, int job, int capacity)
{
    return done + 2 + (size_t)job * (capacity / kTileM);
}

constexpr int kWarps = kThreads / 32; /* 12 copy warps per comm block */
constexpr int kDispatchUnroll = 8;    /* 12 warps per SM: more vectors per lane in flight than the 1024-thread
                                         dispatch kernel's 4 */

/* Until *ctr >= target (acquire at GPU scope), or trap with a record after ~10 s. */
__device__ __forceinline__ void wait_count(const int32_t *ctr, int target, struct mok_sm90_diag *diag, int which,
                                           int index)
{
    int seen;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ctr) : "memory");
    if (seen >= target)
        return;
    long long start = clock64();
    for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ctr) : "memory");
        if (seen >= target)
            return;
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, MOK_SM90_DIAG_MEGA, which, 0, index, seen, target);
    }
}

/* Until the 64-bit flag a peer stores into my window reaches target (acquire at system scope). */
__device__ __forceinline__ void wait_flag(const uint64_t *flag, uint64_t target, struct mok_sm90_diag *diag, int index)
{
    long long start = clock64();
    for (;;) {
        uint64_t seen;
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
        if (seen >= target)
            return;
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, MOK_SM90_DIAG_MEGA, 2, 0, index, (int)seen, (int)target);
    }
}

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
        __syncwarp(); /* the warp's rows are written; lane 0's fence orders them all before its count */
        if (lane == 0 && copied) {
            __threadfence();
            atomicAdd(&a.ready[c], copied);
        }
    }
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

/* Unit u of the compute blocks' list: GEMM1's units [0, u1) (m-tile major, then h column tile), then GEMM2's. */
struct Unit {
    int job;   /* 0: GEMM1 + SwiGLU, 1: GEMM2, 2: shared GEMM1 + SwiGLU, 3: shared GEMM2 */
    int group; /* local expert (0 for the shared jobs) */
    int rb;    /* row block: rows [rb * 128, +128) of the slots (groups are padded to 128 rows), or of own tokens */
    int n;     /* column tile */
};

/* The unit list: the shared jobs' units first (they need no dispatch: they fill its time), us1 of shared GEMM1
 * then us2 of shared GEMM2, then the routed GEMM1's u1 and GEMM2's units. Kept in shared memory and read through
 * a volatile reference where used: held in registers across the main loop they made the consumers spill. */
struct UnitList {
    int us1, us2, u1, n1, n2, ns1, shared_blocks, units;
    int own_units; /* own_first: the routed GEMM1's units over own-row blocks, which go first (0: no such split) */
};

/* The row-block sets of the routed GEMM1 with own_first: per group g, own_pack[g] = first own-only row block
 * (within the group) | their count << 16, own_start[g] = own-only blocks of the groups before g ([groups + 1]). */
struct OwnBlocks {
    const int *own_pack, *own_start;
};

/* A unit as the producer hands it to the consumers (slot_unit): job | column tile << 2 | row block << 10, >= 0
 * (rb < 2^21), so -1 can say "no more". The consumers need no group and no unit list. */
__device__ __forceinline__ int pack_unit(const Unit &p) { return p.job | p.n << 2 | p.rb << 10; }
__device__ __forceinline__ Unit unpack_unit(int v)
{
    Unit p;
    p.job = v & 3, p.n = (v >> 2) & 0xFF, p.rb = v >> 10, p.group = -1;
    return p;
}

/* own_first: group g's row blocks that hold only this rank's own rows (its tokens need no push). A group's rows
 * are in (source rank, token, k) order, so the own ones are one range: found by two binary searches over the
 * entries' source ranks; the blocks wholly inside it (with the padding after the last real row, if the range
 * ends there) are own-only. Returns first block (within the group) | count << 16. A wrong guess here would only
 * cost time: every tile still waits for its rows' ready counters. */
__device__ __forceinline__ int own_row_blocks(const mok_lsa_args &a, int g)
{
    const int r0 = a.offset[g], n = a.rows[g], blocks = (a.offset[g + 1] - r0) / kTileM;
    auto first_at_least = [&](int rank) { /* first row in [r0, r0 + n) whose source rank is >= rank */
        int lo = r0, hi = r0 + n;
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if ((int)((uint32_t)a.entry[mid] >> 25) < rank)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo;
    };
    const int lo = first_at_least(a.rank), hi = first_at_least(a.rank + 1);
    if (hi <= lo)
        return 0;
    const int b0 = (lo - r0 + kTileM - 1) / kTileM;
    const int b1 = hi == r0 + n ? blocks : (hi - r0) / kTileM;
    return b1 > b0 ? b0 | (b1 - b0) << 16 : 0;
}

/* The group holding item `local` of a list where group g's items start at start(g) * per (start: a prefix over the
 * groups, empty groups repeating the same value): the largest g with start(g) * per <= local. */
template <typename Start> __device__ __forceinline__ int group_of(int local, Start start, int groups, int per)
{
    int lo = 0, hi = groups - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (start(mid) * per <= local)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ Unit unit_at(int u, const volatile UnitList &L, const int *mstart, int groups,
                                        int n_major, OwnBlocks own)
{
    const int us1 = L.us1, us2 = L.us2, u1 = L.u1, n1 = L.n1, n2 = L.n2, ns1 = L.ns1, shared_blocks = L.shared_blocks;
    const int own_units = L.own_units;
    Unit p;
    if (u < us1 + us2) { /* shared: one group of shared_blocks row blocks */
        p.job = u < us1 ? 2 : 3;
        int local = u < us1 ? u : u - us1, nt = u < us1 ? ns1 : n2;
        p.group = 0;
        p.rb = n_major ? local % shared_blocks : local / nt;
        p.n = n_major ? local / shared_blocks : local % nt;
        return p;
    }
    u -= us1 + us2;
    p.job = u >= u1;
    int local = p.job ? u - u1 : u, nt = p.job ? n2 : n1;
    if (!p.job && own_units) { /* own_first: the own-only row blocks of every group, then the others */
        const bool mine = local < own_units;
        if (!mine)
            local -= own_units;
        /* group g's blocks in this part start at own_start[g] (mine) or mstart[g] - own_start[g] (the rest) */
        auto part_start = [&](int g) { return mine ? own.own_start[g] : mstart[g] - own.own_start[g]; };
        const int lo = group_of(local, part_start, groups, nt);
        const int own0 = own.own_pack[lo] & 0xFFFF, own_n = own.own_pack[lo] >> 16;
        const int start = part_start(lo);
        const int blocks = mine ? own_n : mstart[lo + 1] - mstart[lo] - own_n;
        const int in_group = local - start * nt;
        int b = n_major ? in_group % blocks : in_group / nt; /* the b-th block of this part within the group */
        if (mine)
            b += own0;
        else if (b >= own0)
            b += own_n; /* the rest: the blocks before the own ones, then those after */
        p.group = lo;
        p.rb = mstart[lo] + b;
        p.n = n_major ? in_group / blocks : in_group % nt;
        return p;
    }
    /* the group whose first unit (row block x column tiles) is <= local */
    int lo = group_of(local, [&](int g) { return mstart[g]; }, groups, nt);
    p.group = lo;
    /* within the group: m-major (neighbouring units share the A rows) or n-major (they share the weight tile) */
    int in_group = local - mstart[lo] * nt, blocks = mstart[lo + 1] - mstart[lo];
    p.rb = mstart[lo] + (n_major ? in_group % blocks : in_group / nt);
    p.n = n_major ? in_group / blocks : in_group % nt;
    return p;
}

/* ---- the compute blocks' epilogue ------------------------------------------------------------------------- */
/* Staged rounds of 128 columns (the core's stage_swiglu / stage_bf16): round 0 the SwiGLU of gate columns [0, 128)
 * with up columns [128, 256) (GEMM1), rounds 1 and 2 accumulator columns [0, 128) and [128, 256) (GEMM2); rounds 3
 * and 4 the same GEMM2 columns sent from the registers (send_plain). */

/* One of 4 words by a lane-dependent index s (0..3): two levels of selects, no local memory. */
__device__ __forceinline__ uint32_t pick4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int s)
{
    const uint32_t lo = (s & 1) ? w1 : w0, hi = (s & 1) ? w3 : w2;
    return (s & 2) ? hi : lo;
}

/* A quad's 4 x 4 transpose: lane q of the quad holds w_j = its column pair (q) of 8-column group j, j = 0..3; it
 * gets back group q whole (column pairs 0..3, 16 bytes). Step k sends w_(q ^ k) to lane q ^ k and receives that
 * lane's w_q, column pair q ^ k of group q; the two conditional swaps put pair p at position p. */
__device__ __forceinline__ uint4 quad_transpose(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int q)
{
    uint32_t r0 = pick4(w0, w1, w2, w3, q);
    uint32_t r1 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 1), 1);
    uint32_t r2 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 2), 2);
    uint32_t r3 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 3), 3);
    uint32_t t;
    if (q & 1) {
        t = r0, r0 = r1, r1 = t;
        t = r2, r2 = r3, r3 = t;
    }
    if (q & 2) {
        t = r0, r0 = r2, r2 = t;
        t = r1, r1 = r3, r3 = t;
    }
    return make_uint4(r0, r1, r2, r3);
}

/* send_from_gemm's stores of one round (kRound 3: accumulator columns [0, 128), 4: [128, 256)) straight from the
 * registers to the destination rows (dst_a: row la's 256 bytes of this round, dst_b: row la + 8's; null for rows
 * with no destination, padding). A lane holds column pair q = lane % 4 of every 8-column group of its two rows; each
 * quad transposes 4 groups (quad_transpose) so every lane stores 16 contiguous bytes, a warp 8 rows x 64 bytes per
 * store. No staging, no bulk copy: in the per-tile profile (2 x H200, megakernel-v7) a staged round's send (the
 * barrier, warp 0 loading the 64 rows' entries and issuing one bulk copy per row) took ~4.5k cycles while the
 * warpgroup's tensor cores idled, about a fifth of a GEMM2 tile over the two rounds. The stores are posted; the end
 * of the consumer loop fences them at system scope before the done flag counts them. */
template <int kRound>
__device__ __forceinline__ void send_plain(const float (&acc)[kTileN / 2], uint8_t *dst_a, uint8_t *dst_b, int lane)
{
    constexpr int kBase = kRound == 4 ? kStageCols / 8 : 0;
    const int q = lane & 3;
#pragma unroll
    for (int half = 0; half < 2; half++) { /* row la: accumulators r, r + 1; row la + 8: r + 2, r + 3 */
        uint8_t *row = half ? dst_b : dst_a;
#pragma unroll
        for (int h = 0; h < 2; h++) { /* 64-byte blocks 2h and 2h + 1 (4 groups each) */
#pragma unroll
            for (int b = 0; b < 2; b++) {
                uint32_t w[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int r = 4 * (kBase + 4 * (2 * h + b) + j) + 2 * half;
                    w[j] = pack_bf16x2(acc[r], acc[r + 1]);
                }
                /* every lane shuffles (the quad's row may have no destination): the store alone is skipped */
                const uint4 v = quad_transpose(w[0], w[1], w[2], w[3], q);
                if (row)
                    *reinterpret_cast<uint4 *>(row + 64 * (2 * h + b) + 16 * q) = v;
            }
        }
    }
}

/* Where send_from_gemm's row goes: the routed GEMM2's row straight into the owner's combine row of its route
 * (with communication skipped: into out, locally), the shared GEMM2's into sy (rows below t_max); null for a row
 * with none (padding, shared rows past t_max). */
__device__ __forceinline__ uint8_t *send_row_dst(const mok_mega_args &m, int job, int row, uint8_t *const *comb_base)
{
    const mok_lsa_args &a = m.lsa;
    if (job == 3)
        return row < a.t_max ? (uint8_t *)(m.sy + (size_t)row * a.hidden) : nullptr;
    const int32_t e = a.entry[row];
    if (e < 0)
        return nullptr;
    const int owner = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    return m.skip == 1 ? (uint8_t *)(m.out + (size_t)row * a.hidden)
                       : comb_base[owner] + ((size_t)t * a.topk + j) * a.hidden * 2;
}

/* Before staging: the staging's previous contents have gone out (the bulk reads of the leader's TMA stores), seen
 * by the warpgroup. */
__device__ __forceinline__ void epilogue_begin(bool issuer, int cwg)
{
    if (issuer)
        mok_bulk_wait_read();
    mok_named_barrier(1 + cwg, 128);
}

/* After staging: the leader stores the two 64-column boxes at column col0 of this consumer's 64 rows; after the
 * tile's last round it counts the half tile in done[job][row block] (not the shared GEMM2's: nothing waits on it)
 * once the bytes are in global memory: the bulk writes complete, ordered before the generic release that the
 * waiting producer or comm warp acquires. */
__device__ __forceinline__ void epilogue_store(const Maps &maps, const mok_mega_args &m, const Unit &p, bool leader,
                                               int cwg, uint8_t *stage, int col0, bool last)
{
    staged_ready(1 + cwg);
    if (!leader)
        return;
    const CUtensorMap *mc = p.job == 0 ? &maps.hc : p.job == 1 ? &maps.oc : p.job == 2 ? &maps.shc : &maps.syc;
    store_staged(mc, col0, p.rb * kTileM + cwg * 64, stage, kStageCols / 64);
    if (last && p.job != 3) {
        mok_bulk_wait(0);
        mok_fence_proxy_async_global();
        __threadfence();
        atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1); /* done1 | done2 | done3 */
    }
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

/* ---- compute role ----------------------------------------------------------------------------------------- */
/* The GEMM pipeline of one block over the units the ticket hands out, in ticket order: the producer thread takes
 * a unit (atomicAdd on the ticket), waits for what its rows need, and loads its k blocks into the ring, writing
 * the unit's index beside the slot of its first k block (slot_unit) before that slot's arrive, so the consumers,
 * which acquire the slot, learn it there; -1 there ends the loop. Units go out in list order, so every GEMM1 unit
 * is taken before any GEMM2 unit: a GEMM2 unit's wait is for units already taken by running blocks, and the
 * producer of each block finishes one unit's loads before taking the next (no cycle).
 *
 * joiner: a comm block that has done its part of the dispatch and is not one of the combine's (m.combine_blocks):
 * from then on it is one more compute block (it scatters no landed rows: the first compute blocks do that). */
template <bool kSend>
__device__ __forceinline__ void compute_role(const Maps &maps, const mok_mega_args &m, int cta, int nctas,
                                             bool joiner, struct mok_sm90_diag *diag)
{
    constexpr int kAcc = kTileN / 2;
    const mok_lsa_args &a = m.lsa;
    const int stages = m.stages, groups = a.local_experts, hidden = a.hidden, inter = m.inter;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (mok_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;
    uint8_t *smem_b = smem_a + (size_t)stages * kSlotABytes;
    uint8_t *smem_c = smem_b + (size_t)stages * kSlotBBytes;
    uint64_t *full = reinterpret_cast<uint64_t *>(smem_c + kStageBytes);
    uint64_t *empty = full + stages;
    int *mstart = reinterpret_cast<int *>(empty + stages); /* first row block of each group, [groups + 1] */
    int *own_pack = mstart + groups + 1, *own_start = own_pack + groups; /* own_first's sets (OwnBlocks): there
                                                                               only with own_first */
    /* the unit whose first k block is in each slot: static, so its address is a constant and costs the consumers
     * (at their register limit) no register */
    __shared__ int slot_unit[kMaxStages];

    const int n1 = inter / (kTileN / 2), n2 = hidden / kTileN; /* column tiles of GEMM1 (h) and GEMM2 (out) */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mok_mbar_init(&full[s], 1);
            mok_mbar_init(&empty[s], 8); /* one arrive per consumer warp */
        }
        mok_fence_mbar_init();
    }
    if (warp == 0) /* row-block prefix: the schedule pads every expert to a multiple of 128 rows */
        warp_group_prefix(groups, lane, mstart, [&](int g) {
            int r0 = a.offset[g], r1 = a.offset[g + 1];
            if (r0 < 0 || r1 < r0 || r1 > a.capacity || r0 % kTileM || r1 % kTileM)
                mok_sm90_fail(diag, MOK_SM90_DIAG_OFFSETS, 0, 0, g, r0, r1);
            return (r1 - r0) / kTileM;
        });
    const bool own_first = m.own_first && a.push;
    if (own_first) /* own-only row blocks of the first own_first groups (own rows need no push: their GEMM1 tiles
                    * go first); the later groups have none, so their blocks keep the plain order. Only a few groups:
                    * each group's row blocks split in two passes stream its weight tiles twice */
        for (int g = threadIdx.x; g < groups; g += blockDim.x)
            own_pack[g] = g < m.own_first ? own_row_blocks(a, g) : 0;
    __syncthreads(); /* every thread of this block is in this role now */
    if (own_first && warp == 0)
        warp_group_prefix(groups, lane, own_start, [&](int g) { return own_pack[g] >> 16; });
    const int blocks_m = mstart[groups];
    const OwnBlocks own = {own_pack, own_start};
    /* kSend: every rank's combine rows in my view of the window, looked up once (the consumers, at their register
     * limit while they send, then only add an offset) */
    __shared__ uint8_t *comb_base[MOK_LSA_MAX_RANKS];
    if (kSend && (int)threadIdx.x < a.nranks)
        comb_base[threadIdx.x] = (uint8_t *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, threadIdx.x);
    /* shared experts: one MLP of shared_inter columns over this rank's own tokens (rows past them are computed
     * from whatever the buffers hold and never stored) */
    const int sinter = m.shared_inter;
    __shared__ UnitList list;
    const volatile UnitList &L = list;
    if (threadIdx.x == 0) {
        list.n1 = n1, list.n2 = n2, list.ns1 = sinter / (kTileN / 2);
        list.shared_blocks = sinter ? (a.my_tokens + kTileM - 1) / kTileM : 0;
        list.us1 = list.shared_blocks * list.ns1, list.us2 = list.shared_blocks * n2;
        list.u1 = blocks_m * n1;
        list.units = list.us1 + list.us2 + list.u1 + blocks_m * n2;
    }
    __syncthreads(); /* own_start (warp 0) and the list */
    if (threadIdx.x == 0)
        list.own_units = own_first ? own_start[groups] * n1 : 0;
    __syncthreads();
    if (!joiner) {
        if (a.push && m.skip != 1) { /* skip 1: the slots still hold the last full forward's rows */
            if (own_first) /* the own rows of the first experts' chunks (the comm blocks copy the rest) */
                scatter_landed(a, 0, own_chunks(a, m), cta, nctas, kScatterOwn, diag);
            else /* one chunk each (the comm blocks copy the rest) */
                scatter_landed(a, 0, first_round(a, m), cta, nctas, kScatterAll, diag);
        }
        if (m.skip == 2) { /* compute skipped: every row block of GEMM2 "done" at once, for the combine */
            if (kSend) { /* ... which is here: the whole block sends its row blocks from out */
                /* 2 vectors in flight, not 8: this path sits before the roles split, and 8 there made ptxas
                 * spill values the GEMM roles keep (the whole kernel shares one register budget) */
                for (int s = cta * kWarps + warp; s < blocks_m * kTileM; s += nctas * kWarps)
                    send_route_row<2>(m, s, lane);
                __syncthreads();
                if (threadIdx.x == 0) /* both of this block's contributions (one per consumer warpgroup otherwise) */
                    for (int i = 0; i < 2; i++)
                        count_and_signal(a, 1, send_contributions(m));
            } else if (threadIdx.x == 0) {
                for (int rb = cta; rb < blocks_m; rb += nctas)
                    atomicAdd(row_counters(m.done, 1, a.capacity) + rb, 2 * n2);
            }
            return;
        }
    }

    if (warp < 4) {
        /* ---- producer: one thread takes the units and issues every TMA load ---- */
        mok_setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            RingPos ring = {0, 0};
            for (;;) {
                const int u = atomicAdd(m.done, 1); /* the ticket */
                if (u >= L.units) /* none left */
                    break;
                Unit p = unit_at(u, L, mstart, groups, m.raster, own);
                const int row0 = p.rb * kTileM;
                const int k_blocks = (p.job == 0 || p.job == 2 ? hidden : p.job == 1 ? inter : sinter) / kBlockK;
                const CUtensorMap *ma = p.job == 0 ? &maps.x : p.job == 1 ? &maps.ha : p.job == 2 ? &maps.sx
                                                                                                  : &maps.sha;
                const CUtensorMap *mb = p.job == 0 ? &maps.w13 : p.job == 1 ? &maps.w2 : p.job == 2 ? &maps.sw13
                                                                                                     : &maps.sw2;
                /* B rows: with SwiGLU the gate half [n * 128, +128) of the group's 2 x n_out rows and the up half
                 * n_out further on (two 128-row boxes); without, 256 rows of the group's n_out */
                int b_row, b_up = -1;
                if (p.job == 0)
                    b_row = p.group * 2 * inter + p.n * (kTileN / 2), b_up = b_row + inter;
                else if (p.job == 2)
                    b_row = p.n * (kTileN / 2), b_up = b_row + sinter;
                else
                    b_row = p.group * hidden + p.n * kTileN; /* job 3: group 0 */
                /* lockstep: unit u of wave u / G (G: the compute blocks) starts once every unit of the earlier waves
                 * has started, so the blocks that share a weight tile (raster=1: neighbouring tickets) load it
                 * together from L2 instead of drifting apart (gemm_sm90's lockstep, per unit). Only lower tickets
                 * are waited for, and each of those starts after waiting only for lower ones: no cycle. */
                const int wave_units = (int)gridDim.x - m.comm_blocks;
                if (m.lockstep && u >= wave_units)
                    wait_count(m.done + 1, u / wave_units * wave_units, diag, 4, u);
                if (p.job == 0) { /* the dispatch's counters of these rows (padding rows have nothing to wait for) */
                    mok_sm90_wait_rows(a.ready, a.chunk_target, a.chunk_rows, row0, row0 + kTileM, diag, u);
                } else if (p.job == 1 || p.job == 3) { /* the GEMM1 half tiles of this row block, all stored */
                    /* job 1 waits on done1, job 3 on the shared GEMM1's done3 (row_counters' job 2) */
                    wait_count(row_counters(m.done, p.job - 1, a.capacity) + p.rb, 2 * (p.job == 1 ? L.n1 : L.ns1),
                               diag, p.job == 1 ? 0 : 3, p.rb);
                    mok_fence_proxy_async_global(); /* TMA (the async proxy) reads what generic acquire saw */
                }
                for (int kb = 0; kb < k_blocks; kb++) {
                    producer_acquire(ring, empty, diag, u, kb);
                    if (kb == 0)
                        slot_unit[ring.slot] = pack_unit(p); /* published by the arrive below (release) */
                    uint64_t *bar = producer_arm(ring, full, kSlotABytes + kSlotBBytes);
                    uint8_t *a_dst = smem_a + (size_t)ring.slot * kSlotABytes;
                    uint8_t *b_dst = smem_b + (size_t)ring.slot * kSlotBBytes;
                    int kc = kb * kBlockK;
                    mok_tma_load_2d(a_dst, ma, kc, row0, bar);
                    mok_tma_load_2d(b_dst, mb, kc, b_row, bar);
                    if (b_up >= 0)
                        mok_tma_load_2d(b_dst + (kTileN / 2) * kRowBytes, mb, kc, b_up, bar);
                    if (kb == 0 && m.lockstep)
                        atomicAdd(m.done + 1, 1); /* this unit has started */
                    ring.advance(stages);
                }
            }
            /* the end: the next slot carries no unit, only the -1 that stops the consumers */
            producer_acquire(ring, empty, diag, -1, 0);
            slot_unit[ring.slot] = -1;
            mok_mbar_arrive(&full[ring.slot]);
        }
        return;
    }

    /* ---- consumers: two warpgroups, rows [0, 64) and [64, 128) of each tile ---- */
    mok_setmaxnreg_inc<kConsumerRegs>();
    const int cwg = warp / 4 - 1, wq = warp % 4;
    const int role = MOK_SM90_DIAG_CONSUMER + cwg;
    const bool leader = wq == 0 && lane == 0;
    const bool signal = kSend && m.skip == 0; /* the sends are the combine: they count toward its done flag */
    float acc[1][kAcc];
    RingPos ring = {0, 0};
    for (;;) {
        mok_sm90_wait(&full[ring.slot], ring.phase, diag, role, ring.slot, -1, 0); /* the unit's first k block, or the end */
        /* lane 0 reads it and hands it to the warp: lane 0 is also the one whose arrive releases the slot to the
         * producer, so the read is ordered before the producer's next write by program order plus that release */
        const int u = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_unit[ring.slot] : 0, 0);
        if (u < 0)
            break;
        const Unit p = unpack_unit(u);
        const int k_blocks = (p.job == 0 || p.job == 2 ? hidden : p.job == 1 ? inter : sinter) / kBlockK;
        if ((p.job == 0 || p.job == 1) && a.entry[p.rb * kTileM + cwg * 64] < 0) {
            /* A routed half tile that starts with padding is all padding (each expert's rows are padded to 128 at
             * its end, and row blocks never cross experts): nobody reads its rows, so no wgmma and no epilogue,
             * only the slots passed back and the half tile counted where the epilogue would have counted it. With
             * rows per expert spread evenly modulo 128, about half of the experts' last row blocks hold such a half.
             * Measured 1-3% faster (2 x H200, DeepSeek-V3 and Qwen3 at 4096-8192 tokens,
             * results/h200x2/2026-11-30-megakernel-v4), less than the skipped tensor work: such a tile still streams
             * its weights and its other half. */
            skip_tile(ring, stages, full, empty, k_blocks, lane, diag, role, u);
            if (leader && (p.job == 0 || !kSend)) /* done1, or done2 that the comm blocks' sends wait for */
                atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1);
            continue;
        }
        /* this warpgroup's 64 rows of A in the slot; the first k block's wait completes at once (one probe) */
        consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes>(ring, stages, full, empty, acc, k_blocks, smem_a,
                                                           cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag, role, u);

        /* Epilogue: staged boxes and TMA stores, 128 columns per round: GEMM1's SwiGLU output in one, GEMM2's 256
         * columns in two (send_from_gemm's GEMM2: no staging, stores from the registers). The routed jobs' row
         * blocks are whole (padded groups); the shared jobs' maps end at t_max rows, so TMA drops what lies past
         * them, and rows between the own token count and t_max get values nobody reads. While the accumulators are
         * live (staging), registers are at the limit: everything else after. */
        uint8_t *stage = smem_c + (size_t)cwg * (kStageBytes / 2);
        const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
        if (p.job == 0 || p.job == 2) {
            epilogue_begin(leader, cwg);
            stage_swiglu(acc[0], stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * kStageCols, true);
        } else if (kSend) { /* GEMM2 rows straight to where they go (the combine rows of their routes, or sy) */
            const int row0 = p.rb * kTileM + cwg * 64;
            uint8_t *da = send_row_dst(m, p.job, row0 + la, comb_base);
            uint8_t *db = send_row_dst(m, p.job, row0 + lb, comb_base);
            const int c0 = p.n * kTileN * 2, c1 = c0 + kStageCols * 2; /* the two rounds' byte offsets in a row */
            send_plain<3>(acc[0], da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
            send_plain<4>(acc[0], da ? da + c1 : nullptr, db ? db + c1 : nullptr, lane);
        } else {
            epilogue_begin(leader, cwg);
            stage_bf16<0, kStageCols / 8>(acc[0], stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * kTileN, false);
            epilogue_begin(leader, cwg);
            stage_bf16<kStageCols / 8, kStageCols / 8>(acc[0], stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * kTileN + kStageCols, true);
        }
    }
    if (wq == 0)
        mok_bulk_wait(0); /* the leader's TMA stores complete (their staging read) before the block ends */
    if (signal) { /* this warpgroup's sends are all in place: one of the done flag's contributions */
        __threadfence_system(); /* each lane's posted stores, some to the peer, before the leader counts them */
        mok_named_barrier(1 + cwg, 128);
        if (leader)
            count_and_signal(a, 1, send_contributions(m));
    }
}

/* ---- comm role -------------------------------------------------------------------------------------------- */
/* The comm blocks that stay for the combine; the others compute once their part of the dispatch is done. */
__device__ __forceinline__ int combine_blocks(const mok_mega_args &m)
{
    return m.combine_blocks > 0 && m.combine_blocks < m.comm_blocks ? m.combine_blocks : m.comm_blocks;
}

/* The dispatch: every routed row to the expert slots that need it (pull), or to the landing rows of the ranks
 * whose experts need it, once per rank (push; the compute blocks scatter them). */
__device__ __forceinline__ void comm_dispatch(const mok_mega_args &m)
{
    const mok_lsa_args &a = m.lsa;
    if (m.skip == 1)
        return; /* communication skipped: the compute blocks run on what the last full forward left */
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = m.comm_blocks * kWarps;
    if (a.push) {
        push_rows<kDispatchUnroll>(a, warp, nwarps, lane);
        signal_done(a, 2, m.comm_blocks); /* "landed", in every window */
    } else {
        dispatch_pull_rows<kDispatchUnroll>(a, warp, nwarps, lane);
    }
}

/* The combine sends, by the first combine_blocks(m) comm blocks: per route, each slot's row to its owner as soon
 * as GEMM2 has stored the slot's row block; per rank, the partial sums once every row block is stored (a token's
 * routes here span all experts). Then the done flag to every owner. */
__device__ __forceinline__ void comm_combine(const mok_mega_args &m, struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    if (m.skip == 1)
        return;
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = combine_blocks(m) * kWarps;
    const int n2 = a.hidden / kTileN, target = 2 * n2;
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

/* kSend: m.send_from_gemm (the GEMM2 epilogue stores rows straight to their owners; no comm block combines). Two
 * kernels, so that each carries only its own two epilogues: with the choice made at run time in one kernel, ptxas
 * reloaded 68 bytes from the stack (over kernel_resources' 64); as two kernels, 60 and 52 (as of 993df70). */
template <bool kSend>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_fwd_kernel(const __grid_constant__ Maps maps, const __grid_constant__ mok_mega_args m,
                          struct mok_sm90_diag *diag)
{
#if MOK_SM90_DEVICE
    if ((int)blockIdx.x < m.comm_blocks) {
        comm_dispatch(m);
        if (m.lsa.push && m.skip != 1) { /* own_first: the landed rows of the first experts' chunks, then every row
                                            * of the others; else the chunks past the first round */
            if (m.own_first) {
                const int own = own_chunks(m.lsa, m);
                scatter_landed(m.lsa, 0, own, (int)blockIdx.x, m.comm_blocks, kScatterRemote, diag);
                scatter_landed(m.lsa, own, slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks, kScatterAll, diag);
            } else
                scatter_landed(m.lsa, first_round(m.lsa, m), slot_chunks(m.lsa), (int)blockIdx.x, m.comm_blocks,
                               kScatterAll, diag);
        }
        if ((int)blockIdx.x < combine_blocks(m) && !kSend) {
            comm_combine(m, diag);
        } else if (m.skip != 2) { /* its part of the dispatch done: one more compute block from now on */
            __syncthreads();
            compute_role<kSend>(maps, m, 0, 0, true, diag);
        }
    } else {
        compute_role<kSend>(maps, m, (int)blockIdx.x - m.comm_blocks, (int)gridDim.x - m.comm_blocks, false, diag);
    }
#else
    __trap(); /* built for a target without wgmma: the launcher refuses before getting here */
#endif
}

int say(char *why, int why_len, const char *msg, long long v)
{
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, msg, v);
    return 0;
}

size_t done_counters(const mok_mega_args *m) { return counters(m->lsa.capacity, m->lsa.t_max, m->shared_inter); }

/* The pipeline depth: as asked, or the deepest that fits next to the 32 KiB C staging. */
int resolve_stages(const mok_mega_args *m, size_t limit)
{
    if (m->stages)
        return m->stages;
    int s = 8;
    while (s > 2 && smem_bytes(s, m->lsa.local_experts, m->own_first) > limit)
        s--;
    return s;
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
    if (cudaFuncGetAttributes(&fa, m->send_from_gemm ? megakernel_fwd_kernel<true> : megakernel_fwd_kernel<false>) !=
        cudaSuccess) {
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
    if (a.hidden / kTileN > 255 || m->inter / (kTileN / 2) > 255 || a.capacity / kTileM >= (1 << 21))
        return say(why, why_len, "hidden %lld, intermediate or capacity too large for the unit packing (at most 255 "
                   "column tiles of each GEMM and 2^21 row blocks)", a.hidden);
    if (m->lockstep < 0 || m->lockstep > 1)
        return say(why, why_len, "lockstep %lld: 0 or 1 (a unit starts once the previous wave's units have)",
                   m->lockstep);
    if (m->combine_blocks < 0 || m->combine_blocks > m->comm_blocks)
        return say(why, why_len, "combine SMs %lld: 0 (all comm SMs) up to the comm SMs (the others compute after "
                   "the dispatch)", m->combine_blocks);
    if (m->skip < 0 || m->skip > 2)
        return say(why, why_len, "skip %lld: 0, 1 (communication) or 2 (compute)", m->skip);
    if (m->stages && (m->stages < 2 || m->stages > 8))
        return say(why, why_len, "stages %lld: 0 (as many as fit) or 2..8", m->stages);
    size_t limit = (size_t)(optin < kSmemLimit ? optin : kSmemLimit);
    if (smem_bytes(resolve_stages(m, limit), a.local_experts, m->own_first) > limit)
        return say(why, why_len, "shared memory: %lld stages of 48 KiB + 32 KiB staging do not fit",
                   resolve_stages(m, limit));
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, "ok");
    return 1;
}

extern "C" size_t mok_megakernel_counters(int capacity, int t_max, int shared_inter)
{
    return counters(capacity, t_max, shared_inter);
}

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
    if (SI && (!encode_tile_map(&maps.sx, m->x_local, (uint64_t)a.t_max, (uint64_t)H, kTileM) ||
               !encode_tile_map(&maps.sw13, m->sw13, (uint64_t)2 * SI, (uint64_t)H, kTileN / 2) ||
               !encode_tile_map(&maps.shc, m->sh, (uint64_t)a.t_max, (uint64_t)SI, 64) ||
               !encode_tile_map(&maps.sha, m->sh, (uint64_t)a.t_max, (uint64_t)SI, kTileM) ||
               !encode_tile_map(&maps.sw2, m->sw2, (uint64_t)H, (uint64_t)SI, kTileN) ||
               !encode_tile_map(&maps.syc, m->sy, (uint64_t)a.t_max, (uint64_t)H, 64)))
        return (int)cudaErrorInvalidValue;
    if (!encode_tile_map(&maps.x, a.xin, (uint64_t)a.capacity, (uint64_t)H, kTileM) ||
        !encode_tile_map(&maps.w13, m->w13, (uint64_t)el * 2 * I, (uint64_t)H, kTileN / 2) ||
        !encode_tile_map(&maps.hc, m->h, (uint64_t)a.capacity, (uint64_t)I, 64) ||
        !encode_tile_map(&maps.ha, m->h, (uint64_t)a.capacity, (uint64_t)I, kTileM) ||
        !encode_tile_map(&maps.w2, m->w2, (uint64_t)el * H, (uint64_t)I, kTileN) ||
        !encode_tile_map(&maps.oc, m->out, (uint64_t)a.capacity, (uint64_t)H, 64))
        return (int)cudaErrorInvalidValue;
    const int sms = mok_sm_count(), optin = mok_smem_optin(); /* asked once per process (common.cuh) */
    mok_mega_args args = *m;
    args.stages = resolve_stages(m, (size_t)(optin < kSmemLimit ? optin : kSmemLimit));
    size_t smem = smem_bytes(args.stages, el, m->own_first);
    auto kernel = m->send_from_gemm ? megakernel_fwd_kernel<true> : megakernel_fwd_kernel<false>;
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
    cudaLaunchAttribute coop;
    coop.id = cudaLaunchAttributeCooperative; /* blocks wait on each other: all resident, or the launch fails */
    coop.val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)sms);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = &coop;
    cfg.numAttrs = 1;
    e = cudaLaunchKernelEx(&cfg, kernel, maps, args, diag_record(s));
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}
