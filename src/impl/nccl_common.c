/* nccl_common: the NCCL baselines' pipeline (see nccl_common.h). */
#include "nccl_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "fp8_mlp.h"
#include "mok_kernels.h"
#include "nccl_backward.h"
#include "nccl_fp8.h"


static size_t row_bytes(const struct mok_nccl_pipe *s) { return (size_t)s->p->hidden * 2; }

/* Counts on the GPU, all-gathered, copied to the host and waited for: the sync that defines this baseline. */
static int count_and_sync(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    cudaStream_t st = s->cl->stream;
    size_t ce = (size_t)s->chunks * p->experts;
    MOK_CHECK(cuda, cudaMemsetAsync(s->counts, 0, ce * sizeof(int32_t), st), return -1);
    MOK_CHECK(cuda,
              mok_route_count(p->ids, p->tokens, p->topk, s->chunk_tokens, p->experts, s->counts, (mok_stream_t)st),
              return -1);
    MOK_CHECK(cuda, mok_route_positions(p->ids, p->tokens, p->topk, s->chunk_tokens, p->experts, s->counts, s->offsets,
                                        s->cursor, s->send_pos, (mok_stream_t)st), return -1);
    MOK_CHECK(nccl, ncclAllGather(s->counts, s->allcounts, ce, ncclInt32, s->cl->nccl, st), return -1);
    MOK_CHECK(cuda, cudaMemcpyAsync(s->h_allcounts, s->allcounts, ce * p->nranks * sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    mok_splits_free(&s->splits);
    if (mok_splits_build(s->h_allcounts, p->nranks, s->chunks, s->expert_groups, p->experts, p->rank, p->tokens,
                         s->chunk_tokens, p->topk, &s->splits))
        FAIL("rank %d: inconsistent expert counts from the GPU (a chunk's counts do not sum to its routes)", p->rank);
    return 0;
}

int mok_nccl_pipe_setup(struct mok_nccl_pipe *s, struct mok_problem *p, struct mok_cluster *cl,
                        const struct mok_nccl_opts *opts, int max_slots, char *err, int err_len)
{
    memset(s, 0, sizeof(*s));
    s->p = p;
    s->cl = cl;
    int chunks = opts->chunks, expert_groups = opts->expert_groups, gemm_streams = opts->gemm_streams;
    int reserve_sms = opts->reserve_sms;
    bool overlap = opts->overlap;
    enum mok_gemm_mode mode = opts->gemm;
    s->no_compute = opts->no_compute;
    chunks = chunks < 1 ? 1 : chunks > p->tokens ? p->tokens : chunks;
    s->chunk_tokens = (p->tokens + chunks - 1) / chunks;
    if (s->chunk_tokens < 1)
        s->chunk_tokens = 1;
    /* the chunk count that covers the tokens (ceil division may need fewer chunks than asked) */
    s->chunks = (p->tokens + s->chunk_tokens - 1) / s->chunk_tokens;
    if (s->chunks < 1)
        s->chunks = 1;
    s->expert_groups = expert_groups < 1 ? 1 : expert_groups > p->local_experts ? p->local_experts : expert_groups;
    s->stages = s->chunks * s->expert_groups;
    s->overlap = overlap;
    s->max_slots = max_slots < 0 ? 0 : max_slots > MOK_NCCL_MAX_SLOTS ? MOK_NCCL_MAX_SLOTS : max_slots;
    size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    size_t C = (size_t)s->chunks, E = (size_t)p->experts, EL = (size_t)p->local_experts, S = (size_t)s->stages;
    if (overlap) {
        /* NCCL's kernels get the highest priority: when GEMM blocks retire, a waiting dispatch or combine is
         * scheduled first instead of queueing behind the rest of the GEMM grid (what Megatron does too) */
        int least = 0, greatest = 0;
        MOK_CHECK(cuda, cudaDeviceGetStreamPriorityRange(&least, &greatest), return -1);
        MOK_CHECK(cuda, cudaStreamCreateWithPriority(&s->comm, cudaStreamNonBlocking, greatest), return -1);
        MOK_CHECK(cuda, cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking), return -1);
    } else {
        s->comm = s->compute = cl->stream;
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&s->counts, C * E * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->allcounts, C * E * p->nranks * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMallocHost((void **)&s->h_allcounts, C * E * p->nranks * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->offsets, C * E * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->cursor, C * E * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->send_pos, T * K * sizeof(int32_t) + 16), return -1);

    /* Capacity: the routing is fixed per problem, so one counting pass sizes the receive side; every run
     * still checks its counts against it. Symmetric windows need one size on every rank: the max. */
    if (count_and_sync(s, err, err_len))
        return -1;
    s->cap_rows = (int)mok_allreduce_max_ll(s->splits.recv_total);
    if (s->cap_rows < 1)
        s->cap_rows = 1;
    long long send_rows = mok_allreduce_max_ll((long long)(T * K));
    if (mok_symmem_alloc(cl, (size_t)send_rows * row_bytes(s) + 16, &s->send, err, err_len) ||
        mok_symmem_alloc(cl, (size_t)send_rows * row_bytes(s) + 16, &s->comb, err, err_len) ||
        mok_symmem_alloc(cl, (size_t)s->cap_rows * row_bytes(s) + 16, &s->recv, err, err_len) ||
        mok_symmem_alloc(cl, (size_t)s->cap_rows * row_bytes(s) + 16, &s->ret, err, err_len))
        return -1;
    size_t cap = (size_t)s->cap_rows;
    MOK_CHECK(cuda, cudaMalloc((void **)&s->em_in, cap * H * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->em_out, cap * H * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->g1, cap * 2 * I * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->hbuf, cap * I * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->em_from_recv, cap * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->recv_from_em, cap * sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMallocHost((void **)&s->h_maps, 2 * cap * sizeof(int32_t)), return -1);
    s->gemm_groups = calloc(S * EL, sizeof(*s->gemm_groups));
    s->ngemm_groups = calloc(S, sizeof(int));
    if (!s->gemm_groups || !s->ngemm_groups)
        FAIL("out of host memory");
    int sms = 0;
    MOK_CHECK(cuda, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device), return -1);
    s->mok_gemm = opts->mok_gemm && !s->no_compute;
    s->mx_scheme = opts->mx_scheme;
    if (s->mok_gemm) {
        s->mok_cfg = mok_gemm_baseline_config(p, reserve_sms > 0 ? sms - reserve_sms : 0);
        s->stage_expert0 = calloc(4 * S, sizeof(int));
        if (!s->stage_expert0)
            FAIL("out of host memory");
        s->stage_experts = s->stage_expert0 + S, s->stage_row0 = s->stage_experts + S, s->stage_rows = s->stage_row0 + S;
        MOK_CHECK(cuda, cudaMalloc((void **)&s->mok_offsets, S * (EL + 1) * sizeof(int32_t)), return -1);
        MOK_CHECK(cuda, cudaMallocHost((void **)&s->h_mok_offsets, S * (EL + 1) * sizeof(int32_t)), return -1);
        mok_gemm_sm90_prepare((mok_stream_t)s->compute); /* its failure record, before any graph capture */
    } else {
        MOK_CHECK(cuda_or_cublas,
                  mok_expert_gemms_init(&s->gemms, mode, gemm_streams, reserve_sms > 0 ? sms - reserve_sms : 0,
                                        p->local_experts, s->stages * mok_nccl_fp8_batches_per_stage(p, false)),
                  return -1);
    }
    if (p->shared) {
        size_t SI = (size_t)p->shared * I;
        MOK_CHECK(cublas, cublasCreate(&s->shared_cublas), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&s->shared_g1, T * 2 * SI * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&s->shared_h, T * SI * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&s->shared_out, T * H * 2), return -1);
    }
    size_t nev = (size_t)s->max_slots * S * 6;
    s->ev = calloc(nev + 1, sizeof(cudaEvent_t));
    s->dispatched = calloc(S, sizeof(cudaEvent_t));
    s->gemmed = calloc(S, sizeof(cudaEvent_t));
    if (!s->ev || !s->dispatched || !s->gemmed)
        FAIL("out of host memory");
    for (size_t i = 0; i < nev; i++)
        MOK_CHECK(cuda, cudaEventCreate(&s->ev[i]), return -1);
    for (size_t c = 0; c < S; c++) {
        MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->dispatched[c], cudaEventDisableTiming), return -1);
        MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->gemmed[c], cudaEventDisableTiming), return -1);
    }
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming), return -1);
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->shared_done, cudaEventDisableTiming), return -1);
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->comm_done, cudaEventDisableTiming), return -1);
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->compute_done, cudaEventDisableTiming), return -1);
    const bool fp8 = p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8;
    if (fp8 && !s->no_compute && mok_nccl_fp8_setup(s, err, err_len))
        return -1;
    if (mok_output_find(&p->out, "h") && !s->no_compute) { /* mok_nccl_pipe_export_h's buffers */
        MOK_CHECK(cuda, cudaMalloc((void **)&s->h_recv, cap * I * 2 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&s->h_back, (size_t)send_rows * I * 2 + 16), return -1);
    }
    if (mok_pass_has_bwd(p->spec.pass) && !s->no_compute)
        return mok_nccl_bwd_setup(s, err, err_len);
    return 0;
}

static cudaEvent_t slot_event(struct mok_nccl_pipe *s, int slot, int chunk, int which)
{
    if (slot < 0 || slot >= s->max_slots)
        return NULL;
    return s->ev[((size_t)slot * s->stages + chunk) * 6 + which];
}

static int mark(struct mok_nccl_pipe *s, int slot, int chunk, int which, cudaStream_t st)
{
    cudaEvent_t e = slot_event(s, slot, chunk, which);
    return e ? (int)cudaEventRecord(e, st) : 0;
}

int mok_nccl_p2p_stage(struct mok_nccl_pipe *s, int c, bool dispatch, const void *src_buf, void *dst_buf,
                       size_t width, ncclDataType_t type, char *err, int err_len)
{
    const struct mok_splits *sp = &s->splits;
    int P = sp->nranks;
    const size_t H = width, esize = type == ncclBfloat16 ? 2 : type == ncclUint8 ? 1 : 4;
    const char *src = src_buf;
    char *dst = dst_buf;
    const int *src_off = dispatch ? sp->send_offset : sp->recv_offset;
    const int *src_cnt = dispatch ? sp->send_count : sp->recv_count;
    const int *dst_off = dispatch ? sp->recv_offset : sp->send_offset;
    const int *dst_cnt = dispatch ? sp->recv_count : sp->send_count;
    MOK_CHECK(nccl, ncclGroupStart(), return -1);
    for (int peer = 0; peer < P; peer++) {
        int i = c * P + peer;
        if (src_cnt[i] > 0)
            MOK_CHECK(nccl,
                      ncclSend(src + (size_t)src_off[i] * H * esize, (size_t)src_cnt[i] * H, type, peer, s->cl->nccl,
                               s->comm),
                      return -1);
        if (dst_cnt[i] > 0)
            MOK_CHECK(nccl,
                      ncclRecv(dst + (size_t)dst_off[i] * H * esize, (size_t)dst_cnt[i] * H, type, peer, s->cl->nccl,
                               s->comm),
                      return -1);
    }
    MOK_CHECK(nccl, ncclGroupEnd(), return -1);
    return 0;
}

cudaError_t mok_nccl_fork(struct mok_nccl_pipe *s, cudaStream_t st)
{
    if (!s->overlap)
        return cudaSuccess;
    cudaError_t ce = cudaEventRecord(s->fork, st);
    if (ce == cudaSuccess)
        ce = cudaStreamWaitEvent(s->comm, s->fork, 0);
    return ce == cudaSuccess ? cudaStreamWaitEvent(s->compute, s->fork, 0) : ce;
}

cudaError_t mok_nccl_join(struct mok_nccl_pipe *s, cudaStream_t st)
{
    if (!s->overlap)
        return cudaSuccess;
    cudaError_t ce = cudaEventRecord(s->comm_done, s->comm);
    if (ce == cudaSuccess)
        ce = cudaEventRecord(s->compute_done, s->compute);
    if (ce == cudaSuccess)
        ce = cudaStreamWaitEvent(st, s->comm_done, 0);
    return ce == cudaSuccess ? cudaStreamWaitEvent(st, s->compute_done, 0) : ce;
}

int mok_nccl_p2p_chunk(struct mok_nccl_pipe *s, int c, bool dispatch, char *err, int err_len)
{
    /* dispatch: send buffer -> peers' recv buffers; combine: ret -> peers' comb, the exact reverse */
    /* without compute the experts "return" their input: combine sends the received rows straight back */
    uint16_t *back = s->no_compute ? s->recv.ptr : s->ret.ptr;
    if (dispatch && s->fp8) /* FP8: wire rows of e4m3 values and their scales (nccl_fp8.h) */
        return mok_nccl_p2p_stage(s, c, true, s->send.ptr, s->recv.ptr, (size_t)s->fp8->wire_bytes, ncclUint8, err,
                                  err_len);
    return mok_nccl_p2p_stage(s, c, dispatch, dispatch ? s->send.ptr : back, dispatch ? s->recv.ptr : s->comb.ptr,
                              (size_t)s->p->hidden, ncclBfloat16, err, err_len);
}

/* gemm=mok's configuration: mok-gemm's measured best at one H200 (results/h200x1/2026-12-01-groundwork: h200x1-gemm
 * and h200x1-small-groups-gemm): 128 x 256 tiles, n-major order (neighbouring CTAs share the weight tile), the
 * deepest ring, every SM the NCCL kernels are not given; 64-row tiles where the local experts average 64 rows or
 * fewer (a 128-row tile would be half padding: 1.07x against 1.21x of the weight stream at 32-43 rows). */
struct mok_gemm_sm90_config mok_gemm_baseline_config(const struct mok_problem *p, int ctas)
{
    double rows = (double)p->tokens * p->nranks * p->topk / ((double)p->experts);
    return (struct mok_gemm_sm90_config){.tile_m = rows <= 64.0 ? 64 : 128, .tile_n = 256, .stages = 0, .sms = ctas,
                                         .cluster_m = 1, .lockstep = 0, .raster = 1};
}

struct mok_core_bwd_config mok_gemm_baseline_bwd_config(int ctas)
{
    return mok_core_bwd_config(256, 0, ctas, 1);
}

int mok_nccl_mok_gemm_supports(const struct mok_problem *p, const struct mok_cluster *cl, int reserve_sms,
                               int mx_scheme, char *why,
                               int why_len)
{
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    struct mok_gemm_sm90_config c = mok_gemm_baseline_config(p, reserve_sms > 0 ? sms - reserve_sms : 0);
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8) { /* nccl_fp8.c's GEMMs */
        c = mok_fp8_mok_config(&c, (int)p->spec.dtype, mx_scheme);
        return mok_fp8_mok_supports(p, &c, why, why_len);
    }
    /* alignment only: the pointers are the stage's rows, 16-byte aligned as hidden and intermediate are */
    const uint16_t *any = (const uint16_t *)(uintptr_t)256;
    struct mok_gemm_args g1 = {.a = any, .b = any, .c = (uint16_t *)(uintptr_t)256, .groups = p->local_experts,
                               .rows_capacity = 1, .n_out = p->inter, .k = p->hidden, .swiglu = 1};
    struct mok_gemm_args g2 = g1;
    g2.n_out = p->hidden, g2.k = p->inter, g2.swiglu = 0;
    if (!mok_gemm_sm90_supports(&g1, &c, why, why_len) || !mok_gemm_sm90_supports(&g2, &c, why, why_len))
        return 0;
    if (!mok_pass_has_bwd(p->spec.pass))
        return 1;
    struct mok_gemm_args gu = g1; /* the forward keeps GEMM1's gate/up rows for the backward */
    gu.n_out = 2 * p->inter, gu.swiglu = 0;
    struct mok_core_bwd_config b = mok_gemm_baseline_bwd_config(c.sms);
    return mok_gemm_sm90_supports(&gu, &c, why, why_len) &&
           mok_core_bwd_supports(&b, p->local_experts, p->hidden, p->inter, why, why_len);
}

/* gemm=mok: GEMM1 with SwiGLU (em_in -> hbuf) and GEMM2 (hbuf -> em_out) of stage st, one grouped launch each
 * over the stage's expert group, whose rows are contiguous in the expert-major buffer (splits.h). With a backward
 * pass GEMM1 is unfused (em_in -> g1, the gate/up rows the backward reads, then the SwiGLU kernel -> hbuf), as
 * the cuBLAS path keeps them. */
static int run_mok_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    size_t H = (size_t)p->hidden, I = (size_t)p->inter, row0 = (size_t)s->stage_row0[st];
    size_t e0 = (size_t)s->stage_expert0[st];
    if (s->stage_rows[st] == 0)
        return 0;
    const int32_t *offset = s->mok_offsets + (size_t)st * (p->local_experts + 1);
    struct mok_gemm_args g1 = {.a = s->em_in + row0 * H, .b = p->w13[set] + e0 * 2 * I * H, .c = s->hbuf + row0 * I,
                               .offset = offset, .groups = s->stage_experts[st], .rows_capacity = s->stage_rows[st],
                               .n_out = (int)I, .k = (int)H, .swiglu = 1};
    struct mok_gemm_args g2 = {.a = s->hbuf + row0 * I, .b = p->w2[set] + e0 * H * I, .c = s->em_out + row0 * H,
                               .offset = offset, .groups = s->stage_experts[st], .rows_capacity = s->stage_rows[st],
                               .n_out = (int)H, .k = (int)I, .swiglu = 0};
    const mok_stream_t cs = (mok_stream_t)s->compute;
    if (s->bwd) {
        g1.c = s->g1 + row0 * 2 * I, g1.n_out = (int)(2 * I), g1.swiglu = 0;
        MOK_CHECK(cuda, mok_gemm_sm90(&g1, &s->mok_cfg, cs), return -1);
        MOK_CHECK(cuda, mok_swiglu_bf16(s->g1 + row0 * 2 * I, s->stage_rows[st], (int)I, s->hbuf + row0 * I, cs),
                  return -1);
    } else {
        MOK_CHECK(cuda, mok_gemm_sm90(&g1, &s->mok_cfg, cs), return -1);
    }
    MOK_CHECK(cuda, mok_gemm_sm90(&g2, &s->mok_cfg, cs), return -1);
    return 0;
}

/* The stages' group offsets for gemm=mok, from this run's splits, copied on stream st before any GEMM. */
static int upload_mok_offsets(struct mok_nccl_pipe *s, cudaStream_t st, char *err, int err_len)
{
    const struct mok_splits *sp = &s->splits;
    int EL = s->p->local_experts;
    for (int c = 0; c < s->chunks; c++)
        for (int g = 0; g < s->expert_groups; g++) {
            int gb, ge, stage = c * s->expert_groups + g;
            mok_splits_group(EL, s->expert_groups, g, &gb, &ge);
            int32_t *off = s->h_mok_offsets + (size_t)stage * (EL + 1);
            off[0] = 0;
            for (int le = gb; le < ge; le++)
                off[le - gb + 1] = off[le - gb] + sp->expert_rows[c * EL + le];
            s->stage_expert0[stage] = gb;
            s->stage_experts[stage] = ge - gb;
            s->stage_row0[stage] = sp->stage_base[stage];
            s->stage_rows[stage] = sp->stage_base[stage + 1] - sp->stage_base[stage];
            if (off[ge - gb] != s->stage_rows[stage] || (ge > gb && sp->expert_offset[c * EL + gb] != s->stage_row0[stage]))
                FAIL("stage %d: its experts' rows (%d from row %d) are not the stage's expert-major rows (%d from %d)",
                     stage, off[ge - gb], ge > gb ? sp->expert_offset[c * EL + gb] : -1, s->stage_rows[stage],
                     s->stage_row0[stage]);
        }
    MOK_CHECK(cuda,
              cudaMemcpyAsync(s->mok_offsets, s->h_mok_offsets, (size_t)s->stages * (EL + 1) * sizeof(int32_t),
                              cudaMemcpyHostToDevice, st),
              return -1);
    return 0;
}

int mok_nccl_run_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    if (s->fp8)
        return mok_nccl_fp8_gemms(s, set, st, err, err_len);
    if (s->mok_gemm)
        return run_mok_gemms(s, set, st, err, err_len);
    MOK_CHECK(cuda_or_cublas,
              mok_expert_gemms_run(&s->gemms, s->compute, st, s->gemm_groups + (size_t)st * p->local_experts,
                                   s->ngemm_groups[st], p->w13[set], p->w2[set], p->hidden, p->inter, s->em_in, s->g1,
                                   s->hbuf, s->em_out),
              return -1);
    return 0;
}

int mok_nccl_pipe_run(struct mok_nccl_pipe *s, int set, uint16_t *y, int slot, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    cudaStream_t st = s->cl->stream;
    size_t H = (size_t)p->hidden;
    if (s->bwd) /* the forward writes the set's saved context */
        mok_nccl_bwd_select(s, set);
    if (count_and_sync(s, err, err_len))
        return -1;
    const struct mok_splits *sp = &s->splits;
    if (sp->recv_total > s->cap_rows)
        FAIL("rank %d: %d rows routed here exceed the capacity of %d set up for this problem", p->rank,
             sp->recv_total, s->cap_rows);
    int32_t *h_em_from_recv = s->h_maps, *h_recv_from_em = s->h_maps + s->cap_rows;
    mok_splits_maps(sp, s->h_allcounts, h_em_from_recv, h_recv_from_em);
    MOK_CHECK(cuda,
              cudaMemcpyAsync(s->em_from_recv, h_em_from_recv, (size_t)sp->recv_total * 4, cudaMemcpyHostToDevice, st),
              return -1);
    MOK_CHECK(cuda,
              cudaMemcpyAsync(s->recv_from_em, h_recv_from_em, (size_t)sp->recv_total * 4, cudaMemcpyHostToDevice, st),
              return -1);
    int EL = p->local_experts;
    for (int c = 0; c < s->chunks; c++)
        for (int g = 0; g < s->expert_groups; g++) {
            int gb, ge, st = c * s->expert_groups + g, n = 0;
            mok_splits_group(EL, s->expert_groups, g, &gb, &ge);
            for (int le = gb; le < ge; le++)
                if (sp->expert_rows[c * EL + le] > 0)
                    s->gemm_groups[(size_t)st * EL + n++] =
                        (struct mok_gemm_group){le, sp->expert_offset[c * EL + le], sp->expert_rows[c * EL + le]};
            s->ngemm_groups[st] = n;
        }
    if (s->mok_gemm && upload_mok_offsets(s, st, err, err_len))
        return -1;
    if (s->fp8) {
        if (mok_nccl_fp8_dispatch_rows(s, set, st, err, err_len))
            return -1;
    } else {
        MOK_CHECK(cuda, mok_scatter_tokens(p->x[set], p->hidden, p->topk, s->send_pos, 0, p->tokens * p->topk,
                                           s->send.ptr, (mok_stream_t)st), return -1);
    }
    MOK_CHECK(cuda, mok_nccl_fork(s, st), return -1);
    if (p->shared) {
        MOK_CHECK(cuda_or_cublas,
                  mok_dense_mlp(s->shared_cublas, s->compute, p->tokens, p->hidden, p->shared * p->inter,
                                p->shared_w13[set], p->shared_w2[set], p->x[set], s->shared_g1, s->shared_h,
                                s->shared_out),
                  return -1);
        MOK_CHECK(cuda, cudaEventRecord(s->shared_done, s->compute), return -1);
        MOK_CHECK(cuda, cudaStreamWaitEvent(s->comm, s->shared_done, 0), return -1);
    }
    /* comm stream order D0 D1 C0 D2 C1 ...: stage s's combine never waits behind a later dispatch */
    for (int step = 0; step <= s->stages; step++) {
        if (step < s->stages) {
            int c = step;
            MOK_CHECK(cuda, mark(s, slot, c, 0, s->comm), return -1);
            if (mok_nccl_p2p_chunk(s, c, true, err, err_len))
                return -1;
            MOK_CHECK(cuda, mark(s, slot, c, 1, s->comm), return -1);
            MOK_CHECK(cuda, cudaEventRecord(s->dispatched[c], s->comm), return -1);
            MOK_CHECK(cuda, cudaStreamWaitEvent(s->compute, s->dispatched[c], 0), return -1);
            int base = sp->stage_base[c], rows = sp->stage_base[c + 1] - base;
            if (!s->no_compute) { /* comm mode skips the experts: combine sends the received rows back */
                if (s->fp8 && mok_nccl_fp8_gather(s, base, rows, err, err_len))
                    return -1;
                if (!s->fp8)
                    MOK_CHECK(cuda, mok_gather_rows(s->recv.ptr, s->em_from_recv + base, rows, p->hidden,
                                                    s->em_in + (size_t)base * H, (mok_stream_t)s->compute), return -1);
                MOK_CHECK(cuda, mark(s, slot, c, 2, s->compute), return -1);
                if (mok_nccl_run_gemms(s, set, c, err, err_len))
                    return -1;
                MOK_CHECK(cuda, mark(s, slot, c, 3, s->compute), return -1);
                MOK_CHECK(cuda,
                          mok_gather_rows(s->em_out, s->recv_from_em + base, rows, p->hidden,
                                          (uint16_t *)s->ret.ptr + (size_t)base * H, (mok_stream_t)s->compute),
                          return -1);
            }
            MOK_CHECK(cuda, cudaEventRecord(s->gemmed[c], s->compute), return -1);
        }
        if (step >= 1) {
            int c = step - 1;
            MOK_CHECK(cuda, cudaStreamWaitEvent(s->comm, s->gemmed[c], 0), return -1);
            MOK_CHECK(cuda, mark(s, slot, c, 4, s->comm), return -1);
            if (mok_nccl_p2p_chunk(s, c, false, err, err_len))
                return -1;
            MOK_CHECK(cuda, mark(s, slot, c, 5, s->comm), return -1);
            if (c % s->expert_groups != s->expert_groups - 1)
                continue; /* a token chunk is complete once its last expert group came back */
            int chunk = c / s->expert_groups, t0 = chunk * s->chunk_tokens;
            int t1 = t0 + s->chunk_tokens < p->tokens ? t0 + s->chunk_tokens : p->tokens;
            MOK_CHECK(cuda,
                      mok_weighted_combine(s->comb.ptr, s->send_pos, p->w, t0, t1, p->topk, p->hidden,
                                           p->shared ? s->shared_out : NULL, y, (mok_stream_t)s->comm),
                      return -1);
        }
    }
    MOK_CHECK(cuda, mok_nccl_join(s, st), return -1);
    return 0;
}

void mok_nccl_pipe_phase_ms(struct mok_nccl_pipe *s, int slot, double out[MOK_NPHASES])
{
    /* the pipeline's own three phases (dispatch, GEMMs, combine), two events each per stage */
    for (int i = 0; i <= MOK_PHASE_COMBINE; i++)
        out[i] = slot >= 0 && slot < s->max_slots ? 0.0 : NAN;
    if (slot < 0 || slot >= s->max_slots)
        return;
    for (int c = 0; c < s->stages; c++)
        for (int ph = 0; ph <= MOK_PHASE_COMBINE; ph++) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, slot_event(s, slot, c, 2 * ph), slot_event(s, slot, c, 2 * ph + 1)) !=
                cudaSuccess) {
                cudaGetLastError();
                out[ph] = NAN;
            } else {
                out[ph] += ms;
            }
        }
}

static void pipe_phase_ms(struct mok_nccl_pipe *s, int slot, double out[MOK_NPHASES])
{
    if (mok_pass_has_fwd(s->p->spec.pass))
        mok_nccl_pipe_phase_ms(s, slot, out);
    mok_nccl_bwd_phase_ms(s, slot, out); /* no-op for the forward alone */
}

int mok_nccl_pipe_export_h(struct mok_nccl_pipe *s, const struct mok_outputs *out, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    uint16_t *h = mok_output_bf16(out, "h");
    if (!h || s->no_compute)
        return 0;
    if (!s->h_recv)
        FAIL("the problem's output h has no export buffers (set up without it)");
    const int I = p->inter;
    cudaStream_t st = s->cl->stream;
    /* h_recv[i] = hbuf[recv_from_em[i]]: as the forward's em_out -> ret, over every stage's rows at once */
    MOK_CHECK(cuda, mok_gather_rows(s->hbuf, s->recv_from_em, s->splits.recv_total, I, s->h_recv, (mok_stream_t)st),
              return -1);
    MOK_CHECK(cuda, mok_nccl_fork(s, st), return -1);
    for (int c = 0; c < s->stages; c++)
        if (mok_nccl_p2p_stage(s, c, false, s->h_recv, s->h_back, (size_t)I, ncclBfloat16, err, err_len))
            return -1;
    MOK_CHECK(cuda, mok_nccl_join(s, st), return -1);
    MOK_CHECK(cuda, mok_gather_rows(s->h_back, s->send_pos, p->tokens * p->topk, I, h, (mok_stream_t)st), return -1);
    return 0;
}

void mok_nccl_pipe_teardown(struct mok_nccl_pipe *s)
{
    if (!s->p)
        return;
    cudaDeviceSynchronize();
    mok_nccl_bwd_teardown(s); /* first: it gives the forward's buffers back to the pipeline */
    mok_nccl_fp8_teardown(s);
    if (s->ev)
        for (size_t i = 0; i < (size_t)s->max_slots * s->stages * 6; i++)
            if (s->ev[i])
                cudaEventDestroy(s->ev[i]);
    for (int c = 0; c < s->stages; c++) {
        if (s->dispatched && s->dispatched[c])
            cudaEventDestroy(s->dispatched[c]);
        if (s->gemmed && s->gemmed[c])
            cudaEventDestroy(s->gemmed[c]);
    }
    cudaEvent_t singles[] = {s->fork, s->shared_done, s->comm_done, s->compute_done};
    for (size_t i = 0; i < 4; i++)
        if (singles[i])
            cudaEventDestroy(singles[i]);
    free(s->ev);
    free(s->dispatched);
    free(s->gemmed);
    mok_expert_gemms_destroy(&s->gemms);
    if (s->shared_cublas)
        cublasDestroy(s->shared_cublas);
    mok_symmem_free(s->cl, &s->send);
    mok_symmem_free(s->cl, &s->comb);
    mok_symmem_free(s->cl, &s->recv);
    mok_symmem_free(s->cl, &s->ret);
    void *dev[] = {s->counts,       s->allcounts,   s->offsets,   s->cursor,   s->send_pos,   s->em_in,
                   s->g1,           s->hbuf,        s->em_out,    s->em_from_recv, s->recv_from_em, s->shared_g1,
                   s->shared_h,     s->shared_out,  s->h_recv,    s->h_back};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
    cudaFreeHost(s->h_allcounts);
    cudaFreeHost(s->h_maps);
    free(s->gemm_groups);
    free(s->ngemm_groups);
    free(s->stage_expert0);
    cudaFree(s->mok_offsets);
    cudaFreeHost(s->h_mok_offsets);
    mok_splits_free(&s->splits);
    if (s->overlap) {
        cudaStreamDestroy(s->comm);
        cudaStreamDestroy(s->compute);
    }
    memset(s, 0, sizeof(*s));
}

int mok_nccl_impl_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const struct mok_nccl_opts *opts,
                        int max_slots, char *err, int err_len)
{
    struct mok_nccl_pipe *s = calloc(1, sizeof(*s));
    if (!s)
        FAIL("out of host memory");
    *state = s;
    return mok_nccl_pipe_setup(s, p, cl, opts, max_slots, err, err_len);
}

/* pass fwd: the forward; bwd: the backward from the set's saved context; fwd_bwd: both, one training step */
int mok_nccl_impl_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct mok_nccl_pipe *s = state;
    if (mok_pass_has_fwd(s->p->spec.pass)) {
        uint16_t *y = mok_impl_forward_y(out, err, err_len);
        if (!y || mok_nccl_pipe_run(s, set, y, slot, err, err_len))
            return -1;
    }
    return s->bwd ? mok_nccl_bwd_run(s, set, out, slot, err, err_len) : 0;
}

void mok_nccl_impl_phase_ms(void *state, int slot, double out[MOK_NPHASES]) { pipe_phase_ms(state, slot, out); }

int mok_nccl_impl_export(void *state, const struct mok_outputs *out, char *err, int err_len)
{
    return mok_nccl_pipe_export_h(state, out, err, err_len);
}

int mok_nccl_impl_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    return mok_nccl_pipe_extras(state, row, t, err, err_len);
}

void mok_nccl_impl_teardown(void *state)
{
    if (state)
        mok_nccl_pipe_teardown(state);
    free(state);
}
