/* megakernel/bwd_compute.cuh: the fused backward's compute role (kernels/megakernel.h, struct mok_mega_bwd_args):
 * the producer's waits and loads per unit of bwd_units.cuh's list (GEMM2 dgrad, GEMM1 dgrad, dW2, dW13), and the
 * consumers' epilogues (the SwiGLU backward with d_router partials; dx rows sent to their owners; the weight
 * gradients); with compute skipped (the breakdown), the sends alone.
 * Part of the fused backward's one translation unit (kernels/megakernel/backward.cu includes it after the forward's
 * layout, sync, units, comm and compute parts, whose helpers it uses); its names live in that file's anonymous
 * namespace. */
#pragma once

namespace {

/* The tensor maps, kernel parameters. dgrad reads the weights transposed (MnMajor: 64 K rows x 64 columns per box,
 * as the grouped GEMM's kBT), wgrad both operands with K = the expert's rows (64 x 64 boxes of the row-major
 * [rows][columns] matrices). */
struct BwdMaps {
    CUtensorMap dy;   /* dy slots [capacity][H], 128-row boxes: A of GEMM2 dgrad */
    CUtensorMap w2t;  /* W2 [EL H][I], 64 x 64: B of GEMM2 dgrad (K = H) */
    CUtensorMap dgu;  /* dgu [capacity][2I], 128-row boxes: A of GEMM1 dgrad */
    CUtensorMap w13t; /* W13 [EL 2I][H], 64 x 64: B of GEMM1 dgrad (K = 2I) */
    CUtensorMap dyt;  /* dy slots, 64 x 64: A of dW2 */
    CUtensorMap hwt;  /* hw [capacity][I], 64 x 64: B of dW2 */
    CUtensorMap dgut; /* dgu, 64 x 64: A of dW13 */
    CUtensorMap xt;   /* x slots [capacity][H], 64 x 64: B of dW13 */
    CUtensorMap dw2c;  /* bf16 dW2 [EL H][I] as C: 64 x 64 store boxes (bf16 gradients); or fp32 with wgrad_reduce:
                        * 64 x 32 boxes added by TMA reduce (encode_tile_map_f32) */
    CUtensorMap dw13c; /* dW13 [EL 2I][H] as C, the same way */
};

#if MOK_SM90_DEVICE
/* done[]: [0] the unit ticket, [1] unused, then per row block the GEMM2-dgrad half tiles stored (dgu, hw and the
 * d_router partials of its rows: what GEMM1 dgrad and the weight gradients wait for), then the same per row block
 * of the shared experts' own tokens (kShared). */
__device__ __forceinline__ int32_t *dgrad2_done(int32_t *done) { return done + 2; }
__device__ __forceinline__ int32_t *shared_dgrad2_done(int32_t *done, int capacity)
{
    return done + 2 + capacity / kTileM;
}

/* ---- epilogues ------------------------------------------------------------------------------------------------ */

__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xFFFF0000u); }

/* The route's router weight in slot `row` (0 for padding): every rank's weights are in all_w after the forward's
 * route, [source rank][t_max * k]. */
__device__ __forceinline__ float slot_weight(const mok_lsa_args &a, int row)
{
    const int32_t e = a.entry[row];
    if (e < 0)
        return 0.0f;
    const int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    return a.all_w[((size_t)p * a.t_max + t) * a.topk + j];
}

/* GEMM2 dgrad's epilogue: the SwiGLU backward of this warpgroup's 64 rows x 256 columns (I columns c0..) of
 * dh' = dy W2 in acc, the math of kernels/util/swiglu.cu's swiglu_bwd_kernel per value (g, u from the saved gu;
 * h rounded to bf16 as the forward stored it; unlike that kernel dh' stays fp32, not rounded to a bf16 GEMM output,
 * and the sigmoid is the forward's ex2 / rcp form): dg, du into dgu, w h into hw, and the row's partial d_router
 * <dh', h> over these columns into dr_part[row][n] (the quad's four lanes summed in a fixed tree). A lane holds
 * column pair q = lane % 4 of every 8-column group of its two rows; per 4 groups (64 bytes of a row) each lane of
 * a quad loads one group whole (16 bytes) of g and of u and the quad transposes them into its pairs
 * (quad_transpose is its own inverse), and the results go back the same way: every access a warp makes is 8 rows
 * x 64 contiguous bytes (whole sectors), not 8 x 16 as 4-byte accesses per pair would be. The caller fences and
 * counts the stores.
 * kShared && sh: a shared-expert tile (b.sh's buffers, intermediate b.sh.inter, weight 1, no d_router); its rows past
 * the own tokens read zeros and store nothing (every lane still shuffles). */
template <bool kShared>
__device__ __forceinline__ void swiglu_bwd_epilogue(const mok_mega_bwd_args &b, bool sh,
                                                    const float (&acc)[kTileN / 2], int row_a, int row_b, int n,
                                                    int lane)
{
    const mok_lsa_args &a = b.m.lsa;
    const bool shared = kShared && sh;
    const int I = shared ? b.sh.inter : b.m.inter, q = lane % 4, c0 = n * kTileN;
    const uint16_t *gu = shared ? b.sh.gu : b.gu;
    uint16_t *dgu = shared ? b.sh.dgu : b.dgu, *hwp = shared ? b.sh.hw : b.hw;
    float dot[2] = {0.0f, 0.0f};
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int row = half ? row_b : row_a;
        const bool real = !shared || row < b.sh.tokens;
        const float w = shared ? 1.0f : slot_weight(a, row);
        const uint8_t *g_row = reinterpret_cast<const uint8_t *>(gu + (size_t)row * 2 * I + c0);
        const uint8_t *u_row = g_row + (size_t)I * 2;
        uint8_t *dg_row = reinterpret_cast<uint8_t *>(dgu + (size_t)row * 2 * I + c0);
        uint8_t *du_row = dg_row + (size_t)I * 2;
        uint8_t *hw_row = reinterpret_cast<uint8_t *>(hwp + (size_t)row * I + c0);
#pragma unroll
        for (int blk = 0; blk < kTileN / 32; blk++) { /* groups 4 blk .. 4 blk + 3: bytes [64 blk, +64) */
            const int off = 64 * blk + 16 * q;
            const uint4 z = make_uint4(0, 0, 0, 0);
            const uint4 gv = real ? __ldg(reinterpret_cast<const uint4 *>(g_row + off)) : z;
            const uint4 uv = real ? __ldg(reinterpret_cast<const uint4 *>(u_row + off)) : z;
            const uint4 gt = quad_transpose(gv.x, gv.y, gv.z, gv.w, q); /* word j: pair q of group 4 blk + j */
            const uint4 ut = quad_transpose(uv.x, uv.y, uv.z, uv.w, q);
            const uint32_t g4[4] = {gt.x, gt.y, gt.z, gt.w}, u4[4] = {ut.x, ut.y, ut.z, ut.w};
            uint32_t wdg[4], wdu[4], whw[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float dg[2], du[2], hw[2];
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const float g = c ? bf16_hi(g4[j]) : bf16_lo(g4[j]), u = c ? bf16_hi(u4[j]) : bf16_lo(u4[j]);
                    const float sig = rcp_approx(1.0f + ex2_approx(g * -1.4426950408889634f)), silu = g * sig;
                    const float hb = bf16_lo(pack_bf16x2(silu * u, 0.0f)); /* h as the forward stored it */
                    const float dh = acc[4 * (4 * blk + j) + 2 * half + c];
                    dot[half] += dh * hb;
                    const float dhw = w * dh;
                    dg[c] = dhw * u * sig * (1.0f + g * (1.0f - sig));
                    du[c] = dhw * silu;
                    hw[c] = w * hb;
                }
                wdg[j] = pack_bf16x2(dg[0], dg[1]), wdu[j] = pack_bf16x2(du[0], du[1]);
                whw[j] = pack_bf16x2(hw[0], hw[1]);
            }
            const uint4 tdg = quad_transpose(wdg[0], wdg[1], wdg[2], wdg[3], q);
            if (real)
                *reinterpret_cast<uint4 *>(dg_row + off) = tdg;
            const uint4 tdu = quad_transpose(wdu[0], wdu[1], wdu[2], wdu[3], q);
            if (real)
                *reinterpret_cast<uint4 *>(du_row + off) = tdu;
            const uint4 thw = quad_transpose(whw[0], whw[1], whw[2], whw[3], q);
            if (real)
                *reinterpret_cast<uint4 *>(hw_row + off) = thw;
        }
    }
    if (shared)
        return;
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float d = dot[half];
        d += __shfl_xor_sync(0xffffffffu, d, 1);
        d += __shfl_xor_sync(0xffffffffu, d, 2);
        if (q == 0)
            b.dr_part[(size_t)(half ? row_b : row_a) * (I / kTileN) + n] = d;
    }
}

/* GEMM1 dgrad's n = 0 tile: the route's d_router (the partials of its row summed in column-tile order: the same
 * bits every run) into its owner's window (dr_base[owner] + route). The partials' counter is acquired again by
 * the reading thread: the producer's acquire ordered them for the TMA loads, this orders them for these loads. */
__device__ __forceinline__ void send_d_router(const mok_mega_bwd_args &b, int row, int rb, float *const *dr_base)
{
    const mok_lsa_args &a = b.m.lsa;
    const int32_t e = a.entry[row];
    if (e < 0)
        return;
    int seen;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(dgrad2_done(b.m.done) + rb) : "memory");
    if (seen < 0) /* never: the counter only grows (a use, so the load stays) */
        mok_sm90_abort();
    const int nt = b.m.inter / kTileN;
    float s = 0.0f;
    for (int n = 0; n < nt; n++)
        s += b.dr_part[(size_t)row * nt + n];
    const int owner = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    dr_base[owner][(size_t)t * a.topk + j] = s;
}

/* A weight gradient tile's rows of this thread (m64n256 fragment: rows la, lb of the warpgroup's 64, columns
 * 8i + cq, +1): fp32 loaded into the accumulators before the k loop (the products add onto them) and stored after,
 * or bf16 written. */
__device__ __forceinline__ void wgrad_load(const float *c, size_t ra, size_t rb, int ld, float (&acc)[kTileN / 2])
{
#pragma unroll
    for (int i = 0; i < kTileN / 8; i++) {
        const float2 va = *reinterpret_cast<const float2 *>(c + ra * ld + 8 * i);
        const float2 vb = *reinterpret_cast<const float2 *>(c + rb * ld + 8 * i);
        acc[4 * i] = va.x, acc[4 * i + 1] = va.y, acc[4 * i + 2] = vb.x, acc[4 * i + 3] = vb.y;
    }
}

__device__ __forceinline__ void wgrad_store_f32(float *c, size_t ra, size_t rb, int ld, const float (&acc)[kTileN / 2])
{
#pragma unroll
    for (int i = 0; i < kTileN / 8; i++) {
        *reinterpret_cast<float2 *>(c + ra * ld + 8 * i) = make_float2(acc[4 * i], acc[4 * i + 1]);
        *reinterpret_cast<float2 *>(c + rb * ld + 8 * i) = make_float2(acc[4 * i + 2], acc[4 * i + 3]);
    }
}

__device__ __forceinline__ void wgrad_store_bf16(uint16_t *c, size_t ra, size_t rb, int ld,
                                                 const float (&acc)[kTileN / 2])
{
#pragma unroll
    for (int i = 0; i < kTileN / 8; i++) {
        *reinterpret_cast<uint32_t *>(c + ra * ld + 8 * i) = pack_bf16x2(acc[4 * i], acc[4 * i + 1]);
        *reinterpret_cast<uint32_t *>(c + rb * ld + 8 * i) = pack_bf16x2(acc[4 * i + 2], acc[4 * i + 3]);
    }
}

/* Round kRound of a weight-gradient tile added by TMA reduce (wgrad_reduce): this warpgroup's accumulator columns
 * [64 kRound, +64) staged as fp32 (two 64 x 32 boxes) once the previous round's boxes are read, then added onto
 * the gradient at column col0 + 64 kRound of rows row0.. by the leader. A template, so the accumulator indexes
 * are constants. */
template <int kRound>
__device__ __forceinline__ void reduce_round(const float (&acc)[kTileN / 2], uint8_t *stage, int la, int lb, int cq,
                                             bool leader, int cwg, const CUtensorMap *mc, int col0, int row0)
{
    epilogue_begin(leader, cwg);
    stage_f32<8 * kRound, 8>(acc, stage, la, lb, cq);
    staged_ready(1 + cwg);
    if (leader)
        reduce_staged_f32(mc, col0 + 64 * kRound, row0, stage, 2);
}

/* ---- the compute role ----------------------------------------------------------------------------------------- */
/* As the forward's compute_role (compute.cuh): one producer thread takes units by the ticket, waits for what they
 * read and loads their k blocks into the ring, writing the unit beside the slot of its first k block; two consumer
 * warpgroups (rows [64 cwg, +64) of every tile: dgrad's rows, wgrad's output rows) run the core's k loop and the
 * unit's epilogue. joiner: a comm block done with its part of the dispatch. kShared: the shared experts' units too
 * (b.sh, their tensor maps in smaps; the same kinds of tile on their own buffers). */
template <bool kShared>
__device__ __forceinline__ void bwd_compute_role(const BwdMaps &maps, const BwdMaps &smaps,
                                                 const mok_mega_bwd_args &b, int cta, int nctas, bool joiner,
                                                 struct mok_sm90_diag *diag)
{
    constexpr int kAcc = kTileN / 2;
    const mok_mega_args &m = b.m;
    const mok_lsa_args &a = m.lsa;
    const int stages = m.stages, groups = a.local_experts, H = a.hidden, I = m.inter;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (mok_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;
    uint8_t *smem_b = smem_a + (size_t)stages * kSlotABytes;
    uint8_t *smem_c = smem_b + (size_t)stages * kSlotBBytes; /* C staging: 64 rows x 128 columns per warpgroup */
    uint64_t *full = reinterpret_cast<uint64_t *>(smem_c + kStageBytes);
    uint64_t *empty = full + stages;
    int *mstart = reinterpret_cast<int *>(empty + stages); /* first row block of each group, [groups + 1] */
    __shared__ int slot_unit[kMaxStages];
    __shared__ BwdList list;
    __shared__ BwdShared slist;
    const volatile BwdList &L = list;
    const volatile BwdShared &S = slist;
    int32_t *sdone = shared_dgrad2_done(m.done, a.capacity);
    /* unit u as the producer (and a consumer re-deciding an empty tile) finds it */
    auto unit_of = [&](int u, int &local, bool &sh) {
        sh = false;
        return kShared ? bwd_unit_with_shared(u, L, S, mstart, groups, m.raster, local, sh)
                       : bwd_unit_at(u, L, mstart, groups, m.raster, local);
    };
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mok_mbar_init(&full[s], 1);
            mok_mbar_init(&empty[s], 8);
        }
        mok_fence_mbar_init();
    }
    if (warp == 0)
        warp_group_prefix(groups, lane, mstart, [&](int g) {
            int r0 = a.offset[g], r1 = a.offset[g + 1];
            if (r0 < 0 || r1 < r0 || r1 > a.capacity || r0 % kTileM || r1 % kTileM)
                mok_sm90_fail(diag, MOK_SM90_DIAG_OFFSETS, 0, 0, g, r0, r1);
            return (r1 - r0) / kTileM;
        });
    __shared__ uint8_t *comb_base[MOK_LSA_MAX_RANKS];
    __shared__ float *dr_base[MOK_LSA_MAX_RANKS];
    if ((int)threadIdx.x < a.nranks) {
        comb_base[threadIdx.x] = (uint8_t *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, threadIdx.x);
        dr_base[threadIdx.x] = (float *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_dr, threadIdx.x);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        list = bwd_list(mstart[groups], groups, H, I, b.wgrad_mix);
        if (kShared)
            slist = bwd_shared_list((b.sh.tokens + kTileM - 1) / kTileM, H, b.sh.inter);
    }
    __syncthreads();
    if (!joiner && a.push && m.skip != 1) /* one chunk of landed dy rows each (the comm blocks copy the rest) */
        scatter_landed(a, 0, first_round(a, m), cta, nctas, kScatterAll, diag);
    if (m.skip == 2) { /* compute skipped (the breakdown's communication alone): every slot's row of m.out and a
                        * d_router value to its owner, as the GEMM epilogues would send them, then both of this
                        * block's contributions to the done flag */
        const int rows = mstart[groups] * kTileM;
        for (int s = cta * kWarps + warp; s < rows; s += nctas * kWarps) {
            send_route_row<2>(m, s, lane);
            const int32_t e = a.entry[s];
            if (lane == 0 && e >= 0)
                dr_base[(uint32_t)e >> 25][(size_t)((e >> 5) & 0xFFFFF) * a.topk + (e & 31)] = 0.0f;
        }
        __threadfence_system();
        __syncthreads();
        if (threadIdx.x == 0)
            for (int i = 0; i < 2; i++)
                count_and_signal(a, 1, send_contributions(m));
        return;
    }

    if (warp < 4) {
        /* ---- producer ---- */
        mok_setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x == 0) {
            RingPos ring = {0, 0};
            for (;;) {
                const int u = atomicAdd(m.done, 1);
                if (u >= (kShared ? L.units + S.units : L.units)) /* read each time, as in the forward's */
                    break;
                int local;
                bool sh;
                const BwdUnit p = unit_of(u, local, sh);
                const BwdMaps &mp = kShared && sh ? smaps : maps; /* the shared experts' maps: group 0, row 0 = own
                                                                   * token 0 */
                int k_blocks, row0;
                if (p.job == kJobDgrad2) {
                    row0 = p.rb * kTileM, k_blocks = H / kBlockK;
                    if (!(kShared && sh)) /* the shared experts' dy rows are this rank's input: nothing to wait for */
                        mok_sm90_wait_rows(a.ready, a.chunk_target, a.chunk_rows, row0, row0 + kTileM, diag, u);
                } else if (p.job == kJobDgrad1) {
                    row0 = p.rb * kTileM, k_blocks = 2 * (kShared && sh ? b.sh.inter : I) / kBlockK;
                    if (kShared && sh)
                        wait_count(sdone + p.rb, 2 * S.n2, diag, 7, p.rb);
                    else
                        wait_count(dgrad2_done(m.done) + p.rb, 2 * L.n2, diag, 5, p.rb);
                    mok_fence_proxy_async_global();
                } else if (kShared && sh) { /* every shared GEMM2-dgrad tile */
                    row0 = 0;
                    k_blocks = (b.sh.tokens + kBlockK - 1) / kBlockK;
                    for (int rb = 0; rb < S.blocks; rb++)
                        wait_count(sdone + rb, 2 * S.n2, diag, 8, rb);
                    mok_fence_proxy_async_global();
                } else { /* every GEMM2-dgrad tile of the expert (its dgu and hw rows; its dy rows landed before) */
                    row0 = a.offset[p.group];
                    k_blocks = (a.rows[p.group] + kBlockK - 1) / kBlockK;
                    for (int rb = mstart[p.group]; rb < mstart[p.group + 1]; rb++)
                        wait_count(dgrad2_done(m.done) + rb, 2 * L.n2, diag, 6, rb);
                    mok_fence_proxy_async_global();
                }
                for (int kb = 0; kb < k_blocks; kb++) {
                    producer_acquire(ring, empty, diag, u, kb);
                    if (kb == 0)
                        slot_unit[ring.slot] = pack_bwd_unit(p, local) | (kShared && sh ? kSharedUnit : 0);
                    uint64_t *bar = producer_arm(ring, full, kSlotABytes + kSlotBBytes);
                    uint8_t *a_dst = smem_a + (size_t)ring.slot * kSlotABytes;
                    uint8_t *b_dst = smem_b + (size_t)ring.slot * kSlotBBytes;
                    const int kc = kb * kBlockK;
                    if (p.job <= kJobDgrad1) {
                        mok_tma_load_2d(a_dst, p.job == kJobDgrad2 ? &mp.dy : &mp.dgu, kc, row0, bar);
                        const CUtensorMap *mb = p.job == kJobDgrad2 ? &mp.w2t : &mp.w13t;
                        const int b_row = p.group * (p.job == kJobDgrad2 ? H : 2 * I) + kc;
                        for (int j = 0; j < kTileN / 64; j++)
                            mok_tma_load_2d(b_dst + j * 64 * kRowBytes, mb, p.n * kTileN + 64 * j, b_row, bar);
                    } else {
                        const bool w2 = p.job == kJobWgrad2;
                        for (int j = 0; j < kTileM / 64; j++)
                            mok_tma_load_2d(a_dst + j * 64 * kRowBytes, w2 ? &mp.dyt : &mp.dgut,
                                            p.rb * kTileM + 64 * j, row0 + kc, bar);
                        for (int j = 0; j < kTileN / 64; j++)
                            mok_tma_load_2d(b_dst + j * 64 * kRowBytes, w2 ? &mp.hwt : &mp.xt,
                                            p.n * kTileN + 64 * j, row0 + kc, bar);
                    }
                    ring.advance(stages);
                }
                if (k_blocks == 0) { /* an expert without rows (or no own tokens): no loads, but the consumers
                                      * still learn the unit */
                    producer_acquire(ring, empty, diag, u, 0);
                    slot_unit[ring.slot] = -2 - u; /* < -1: a unit with no k blocks, -2 - u */
                    mok_mbar_arrive(&full[ring.slot]);
                    ring.advance(stages);
                }
            }
            producer_acquire(ring, empty, diag, -1, 0);
            slot_unit[ring.slot] = -1;
            mok_mbar_arrive(&full[ring.slot]);
        }
        return;
    }

    /* ---- consumers ---- */
    mok_setmaxnreg_inc<kConsumerRegs>();
    /* the warpgroup through a shuffle, so that ptxas knows it uniform over each warp: branches on values derived
     * from it (a half tile of padding) otherwise count as divergent and it serializes the wgmmas (C7520) */
    const int cwg = __shfl_sync(0xffffffffu, warp / 4 - 1, 0), wq = warp % 4;
    const int role = MOK_SM90_DIAG_CONSUMER + cwg;
    const bool leader = wq == 0 && lane == 0;
    const bool signal = m.skip == 0;
    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
    uint8_t *stage = smem_c + (size_t)cwg * (kStageBytes / 2);
    float acc[1][kAcc];
    RingPos ring = {0, 0};
    for (;;) {
        mok_sm90_wait(&full[ring.slot], ring.phase, diag, role, ring.slot, -1, 0);
        const int v = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_unit[ring.slot] : 0, 0);
        if (v == -1)
            break;
        if (v < -1) { /* a weight-gradient tile of an expert without rows: the slot carried only the unit */
            release_slot(&empty[ring.slot], 1, lane, 0);
            ring.advance(stages);
            const int u = -2 - v;
            if (b.dw13_bf16) { /* written, not accumulated: the step's gradient is zero */
                int local;
                bool sh;
                const BwdUnit p = unit_of(u, local, sh);
                const bool w2 = p.job == kJobWgrad2;
                const int Iu = kShared && sh ? b.sh.inter : I, M = w2 ? H : 2 * Iu, N = w2 ? Iu : H;
                uint16_t *base = kShared && sh ? (w2 ? b.sh.dw2_bf16 : b.sh.dw13_bf16)
                                               : (w2 ? b.dw2_bf16 : b.dw13_bf16);
                uint16_t *c = base + (size_t)p.group * M * N + p.n * kTileN + cq;
                const size_t ra = (size_t)p.rb * kTileM + cwg * 64 + la;
#pragma unroll
                for (int i = 0; i < kAcc; i++)
                    acc[0][i] = 0.0f;
                wgrad_store_bf16(c, ra, ra + 8, N, acc[0]);
            }
            continue;
        }
        const int job = v & 3;
        const bool sh = kShared && (v & kSharedUnit); /* a shared experts' unit */
        if (job <= kJobDgrad1) {
            const int rb = kShared ? (v >> 10) & 0xFFFFF : v >> 10, n = (v >> 2) & 0xFF;
            const int k_blocks = (job == kJobDgrad2 ? H : 2 * (sh ? b.sh.inter : I)) / kBlockK;
            const int row_a = rb * kTileM + cwg * 64 + la, row_b = row_a + 8;
            if (sh ? rb * kTileM + cwg * 64 >= b.sh.tokens : a.entry[rb * kTileM + cwg * 64] < 0) {
                /* a half tile of padding (past the own tokens): nobody reads its rows */
                skip_tile(ring, stages, full, empty, k_blocks, lane, diag, role, v);
                if (leader && job == kJobDgrad2)
                    atomicAdd(sh ? sdone + rb : dgrad2_done(m.done) + rb, 1);
                continue;
            }
            consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes, 1, KMajor, MnMajor>(
                ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag, role,
                v);
            if (job == kJobDgrad2) {
                swiglu_bwd_epilogue<kShared>(b, sh, acc[0], row_a, row_b, n, lane);
                __threadfence(); /* every lane's stores before the leader counts the half tile */
                mok_named_barrier(1 + cwg, 128);
                if (leader)
                    atomicAdd(sh ? sdone + rb : dgrad2_done(m.done) + rb, 1);
            } else if (sh) { /* the shared experts' dx rows, here, for the owner's sum (none past the own tokens) */
                const int c0 = n * kTileN * 2, c1 = c0 + kStageCols * 2;
                uint8_t *da = row_a < b.sh.tokens ? (uint8_t *)(b.sh.dx + (size_t)row_a * H) : nullptr;
                uint8_t *db = row_b < b.sh.tokens ? (uint8_t *)(b.sh.dx + (size_t)row_b * H) : nullptr;
                send_plain<3>(acc[0], da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
                send_plain<4>(acc[0], da ? da + c1 : nullptr, db ? db + c1 : nullptr, lane);
            } else { /* dx rows to their owners' combine rows (with communication skipped: m.out) */
                uint8_t *da = send_row_dst(m, 1, row_a, comb_base);
                uint8_t *db = send_row_dst(m, 1, row_b, comb_base);
                const int c0 = n * kTileN * 2, c1 = c0 + kStageCols * 2;
                send_plain<3>(acc[0], da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
                send_plain<4>(acc[0], da ? da + c1 : nullptr, db ? db + c1 : nullptr, lane);
                if (n == 0 && lane % 4 == 0 && m.skip == 0) {
                    send_d_router(b, row_a, rb, dr_base);
                    send_d_router(b, row_b, rb, dr_base);
                }
            }
            continue;
        }
        /* a weight-gradient tile: output rows [rb 128 + 64 cwg, +64) x columns [n 256, +256) of expert g's
         * gradient, K = the expert's rows in order */
        int g, mt, nt;
        const bool w2 = job == kJobWgrad2;
        if (sh)
            wgrad_tile_of((v & ~kSharedUnit) >> 2, w2 ? S.w2m : S.w13m, w2 ? S.w2n : S.w13n, g, mt, nt);
        else
            wgrad_tile_of(v >> 2, w2 ? L.w2m : L.w13m, w2 ? L.w2n : L.w13n, g, mt, nt);
        const int Iu = sh ? b.sh.inter : I, M = w2 ? H : 2 * Iu, N = w2 ? Iu : H;
        const int rows = sh ? b.sh.tokens : a.rows[g], k_blocks = (rows + kBlockK - 1) / kBlockK;
        const size_t ra = (size_t)mt * kTileM + cwg * 64 + la, off = (size_t)g * M * N + nt * kTileN + cq;
        const KTail tail = {rows - (k_blocks - 1) * kBlockK, cwg, 0};
        if (b.dw13_f32 && b.wgrad_reduce) { /* the products alone, added onto the gradient by TMA reduce in four
                                               * rounds of 64 columns: the SM never waits for the gradient's bytes */
            consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes, 1, MnMajor, MnMajor, true, false>(
                ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag,
                role, v, 0, tail);
            const BwdMaps &mp = sh ? smaps : maps;
            const CUtensorMap *mc = w2 ? &mp.dw2c : &mp.dw13c;
            const int row0 = g * M + mt * kTileM + cwg * 64, col0 = nt * kTileN;
            reduce_round<0>(acc[0], stage, la, lb, cq, leader, cwg, mc, col0, row0);
            reduce_round<1>(acc[0], stage, la, lb, cq, leader, cwg, mc, col0, row0);
            reduce_round<2>(acc[0], stage, la, lb, cq, leader, cwg, mc, col0, row0);
            reduce_round<3>(acc[0], stage, la, lb, cq, leader, cwg, mc, col0, row0);
        } else if (b.dw13_f32) {
            float *c = (sh ? (w2 ? b.sh.dw2_f32 : b.sh.dw13_f32) : (w2 ? b.dw2_f32 : b.dw13_f32)) + off;
            wgrad_load(c, ra, ra + 8, N, acc[0]);
            consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes, 1, MnMajor, MnMajor, true, true>(
                ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag,
                role, v, 0, tail);
            wgrad_store_f32(c, ra, ra + 8, N, acc[0]);
        } else { /* staged in two rounds of 128 columns and stored by TMA in whole rows: stores from the fragments
                  * (4 bytes a lane) took the bf16 wgrad twice as long (mok-gemm, results/h200x1/2026-12-04-mok-gemm-
                  * backward section 3) */
            consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes, 1, MnMajor, MnMajor, true, false>(
                ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag,
                role, v, 0, tail);
            const BwdMaps &mp = sh ? smaps : maps;
            const CUtensorMap *mc = w2 ? &mp.dw2c : &mp.dw13c;
            const int row0 = g * M + mt * kTileM + cwg * 64;
            epilogue_begin(leader, cwg);
            stage_bf16<0, kStageCols / 8>(acc[0], stage, la, lb, cq);
            staged_ready(1 + cwg);
            if (leader)
                store_staged(mc, nt * kTileN, row0, stage, kStageCols / 64);
            epilogue_begin(leader, cwg);
            stage_bf16<kStageCols / 8, kStageCols / 8>(acc[0], stage, la, lb, cq);
            staged_ready(1 + cwg);
            if (leader)
                store_staged(mc, nt * kTileN + kStageCols, row0, stage, kStageCols / 64);
        }
    }
    if (wq == 0)
        mok_bulk_wait(0); /* the leader's TMA stores complete (their staging read) before the block ends */
    if (signal) { /* this warpgroup's dx rows and d_router values are in place: one of the done flag's contributions */
        __threadfence_system();
        mok_named_barrier(1 + cwg, 128);
        if (leader)
            count_and_signal(a, 1, send_contributions(m));
    }
}
#endif

} // namespace
