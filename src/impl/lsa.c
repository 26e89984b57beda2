/* lsa: mok's own dispatch and combine (comm mode): device-built schedule, NVLink loads and stores through NCCL
 * LSA pointers into symmetric windows, epoch flags instead of host synchronization (kernels/comm/lsa_*.cu). The host
 * never sees a split size on the timed path; it rebuilds the schedule from the gathered routing only to check the
 * device's and to count the bytes that crossed NVLink for the report. The state, phases (including lsa-layer's
 * GEMMs) and checks here serve lsa_layer.c too. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "lsa.h"
#include "lsa_layout.h"
#include "lsa_state.h"
#include "sched_check.h"


int lsa_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                        int why_len)
{
    /* the parameter combinations and the problem's limits are decided without the GPU (host_supports.c) */
    struct mok_params_lsa q = mok_params_lsa(params);
    (void)p;
    if (cl->lsa_size != cl->nranks) {
        snprintf(why, (size_t)why_len, "needs every rank in one NVLink (LSA) domain: LSA team %d of %d ranks",
                 cl->lsa_size, cl->nranks);
        return 0;
    }
    if (q.layout == 1 && q.copy == 1 && !mok_lsa_ring_fits(p->hidden)) {
        snprintf(why, (size_t)why_len, "copy=bulk: three rows of hidden %d do not fit in a block's shared memory",
                 p->hidden);
        return 0;
    }
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    if (q.comm_sms > sms) {
        snprintf(why, (size_t)why_len, "comm_sms %d > the GPU's %d SMs", q.comm_sms, sms);
        return 0;
    }
    if (q.reduce == 1 && mok_lsa_overlap_reduce_blocks(q.comm_sms) < 1) {
        snprintf(why, (size_t)why_len, "reduce=overlap needs an SM for reduce blocks beside the %d combine blocks, one "
                 "resident block of 512 threads per SM (GPU: %d SMs); use reduce=after", q.comm_sms, sms);
        return 0;
    }
    return 1;
}

static int enqueue_phase(void *ctx, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len);

int lsa_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                     char *err, int err_len)
{
    struct lsa_state *s = calloc(1, sizeof(*s));
    if (!s)
        FAIL("out of host memory");
    *state = s;
    s->p = p;
    s->cl = cl;
    struct mok_params_lsa q = mok_params_lsa(params);
    s->sms = q.comm_sms;
    struct mok_lsa_args *a = &s->a;
    int P = p->nranks, k = p->topk, H = p->hidden, EL = p->local_experts;
    int tmax = (int)mok_allreduce_max_ll(p->tokens);
    *a = (struct mok_lsa_args){.rank = p->rank, .nranks = P, .experts = p->experts, .local_experts = EL, .topk = k,
                               .t_max = tmax, .hidden = H, .tile_rows = q.tile_rows,
                               .chunk_rows = q.chunk_rows, .combine_per_rank = q.combine,
                               .bulk_copies = q.copy, .landing = q.layout,
                               .push = q.dispatch, .reduce_overlap = q.reduce,
                               .reduce_chunk = q.reduce_chunk};
    /* small: auto, off, v1 (the first one-launch variants, kept to measure against) */
    a->small_paths = q.small == 0 ? MOK_LSA_SMALL_FUSED : q.small == 2 ? MOK_LSA_SMALL_V1
                                                                                      : MOK_LSA_SMALL_OFF;
    a->capacity = mok_schedule_capacity(p->spec.capacity_factor, tmax, k, EL, a->tile_rows);
    if (a->capacity < 1)
        FAIL("capacity_factor %g gives no capacity", p->spec.capacity_factor);
    s->nchunks = (a->capacity + a->chunk_rows - 1) / a->chunk_rows;

    /* window: one token-row slot per input set (src/lsa_layout.c); with a backward (lsa-layer), a dy slot per set
     * after them */
    size_t row = (size_t)H * 2;
    int slots = p->sets * (mok_pass_has_bwd(p->spec.pass) ? 2 : 1);
    s->off_h = mok_lsa_layout(a, slots);
    if (mok_symmem_alloc(cl, s->off_h + lsa_fp8_window_bytes(p, tmax), &s->win, err, err_len))
        return -1;
    a->window = s->win.window;
    MOK_CHECK(cuda, cudaMemset(s->win.ptr, 0, a->off_x), return -1); /* flags, chunk flags and table start at zero */
    for (int set = 0; set < p->sets; set++)
        MOK_CHECK(cuda, cudaMemcpy((char *)s->win.ptr + a->off_x + set * a->x_set_bytes, p->x[set],
                                   (size_t)p->tokens * row, cudaMemcpyDeviceToDevice), return -1);

    size_t routes = (size_t)P * tmax * k;
    MOK_CHECK(cuda, cudaMalloc((void **)&a->epoch, 3 * sizeof(uint64_t)), return -1);
    MOK_CHECK(cuda, cudaMemset(a->epoch, 0, 3 * sizeof(uint64_t)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->all_tokens, sizeof(int32_t) * P), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->all_ids, sizeof(int32_t) * routes + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->all_w, sizeof(float) * routes + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->rows, sizeof(int32_t) * EL), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->offset, sizeof(int32_t) * (EL + 1)), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->entry, sizeof(int32_t) * a->capacity), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->route_slot, sizeof(int32_t) * routes + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->block_off, sizeof(int32_t) * (size_t)P * a->sched_blocks * EL), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->chunk_target, sizeof(int32_t) * s->nchunks), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->ready, sizeof(int32_t) * s->nchunks), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&a->status, sizeof(int32_t) * 4), return -1);
    MOK_CHECK(cuda, cudaMemset(a->status, 0, sizeof(int32_t) * 4), return -1);
    if (!a->landing) /* landing: rows land in the window, one per (rank, token), and slots read them there */
        MOK_CHECK(cuda, cudaMalloc((void **)&a->xin, (size_t)a->capacity * row), return -1);
    a->expert_out = a->xin; /* comm mode: experts return their input */
    a->my_ids = p->ids;
    a->my_w = p->w;
    a->my_tokens = p->tokens;

    if (phased_run_init(&s->run, enqueue_phase, s, p->sets, q.launch == 1, max_slots, err, err_len))
        return -1;
    MOK_CHECK(cuda, cudaStreamCreateWithFlags(&s->side, cudaStreamNonBlocking), return -1);
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming), return -1);
    MOK_CHECK(cuda, cudaEventCreateWithFlags(&s->join, cudaEventDisableTiming), return -1);
    /* the host copy of the schedule, from every rank's routing: what extras() checks the device's against */
    if (sched_check_build(p, tmax, a->tile_rows, a->chunk_rows, a->capacity, &s->host, err, err_len))
        return -1;
    MOK_CHECK(cuda, cudaDeviceSynchronize(), return -1);
    MPI_Barrier(MPI_COMM_WORLD); /* every window is zeroed before anyone flags into it */
    return 0;
}

/* lsa-layer: GEMM1 + SwiGLU and GEMM2 over the schedule's expert-major slots. The schedule's padded expert
 * offsets are the GEMM's group offsets: padding rows are computed and never combined. which: 1 or 2. With
 * fed set, GEMM1's tiles wait on the dispatch's ready counters (it runs beside the dispatch). */
static int run_gemm(struct lsa_state *s, int which, int set, bool fed, cudaStream_t st)
{
    struct mok_problem *p = s->p;
    struct mok_lsa_args *a = &s->a;
    struct mok_gemm_args g = {.a = a->xin, .b = p->w13[set], .c = s->h, .offset = a->offset,
                              .groups = a->local_experts, .rows_capacity = a->capacity, .n_out = p->inter,
                              .k = p->hidden, .swiglu = 1};
    if (which == 1 && s->bwd) /* the backward reads GEMM1's gate and up: unfused, then the SwiGLU kernel */
        return lsa_bwd_gemm1(s, set, st);
    if (which == 2)
        g = (struct mok_gemm_args){.a = s->h, .b = p->w2[set], .c = s->out, .offset = a->offset,
                                   .groups = a->local_experts, .rows_capacity = a->capacity, .n_out = p->hidden,
                                   .k = p->inter, .swiglu = 0};
    struct mok_gemm_sm90_config cfg = s->gemm_cfg;
    if (fed) /* beside the dispatch: only the SMs it leaves (both resident at once, whichever starts first) */
        g.ready = a->ready, g.ready_target = a->chunk_target, g.ready_rows = a->chunk_rows, cfg.sms = s->gemm_sms_fed;
    return s->gemm_portable ? mok_gemm_portable(&g, (mok_stream_t)st) : mok_gemm_sm90(&g, &cfg, (mok_stream_t)st);
}

/* The kernels of one phase (phased_run's phase_fn): the same calls whether launched directly or captured. */
static int enqueue_phase(void *ctx, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len)
{
    struct lsa_state *s = ctx;
    return s->bwd ? lsa_bwd_phase(s, phase, set, st, err, err_len) : lsa_forward_phase(s, phase, set, y, st, err,
                                                                                     err_len);
}

int lsa_dispatch(struct lsa_state *s, const struct mok_lsa_args *a, int set, cudaStream_t st, char *err, int err_len)
{
    if (!s->overlap_gemm1 && mok_lsa_dispatch_fused_fits(a, s->sms)) {
        /* small, push: table, schedule, push and the landed wait in one launch (sms + 1 blocks) */
        MOK_CHECK(cuda, mok_lsa_dispatch_fused(a, s->sms, (mok_stream_t)st), return -1);
        return 0;
    }
    MOK_CHECK(cuda, mok_lsa_publish(a, (mok_stream_t)st), return -1);
    if (a->push) { /* rows go out while the schedule is built beside them; both after the publish */
        MOK_CHECK(cuda, cudaEventRecord(s->fork, st), return -1);
        MOK_CHECK(cuda, cudaStreamWaitEvent(s->side, s->fork, 0), return -1);
        MOK_CHECK(cuda, mok_lsa_push(a, s->sms, (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, mok_lsa_schedule(a, (mok_stream_t)s->side), return -1);
        MOK_CHECK(cuda, cudaEventRecord(s->join, s->side), return -1);
        MOK_CHECK(cuda, cudaStreamWaitEvent(st, s->join, 0), return -1);
    } else {
        MOK_CHECK(cuda, mok_lsa_schedule(a, (mok_stream_t)st), return -1);
    }
    if (s->overlap_gemm1) { /* GEMM1 on the SMs the dispatch leaves, each tile as soon as its rows are in */
        MOK_CHECK(cuda, cudaEventRecord(s->fork, st), return -1);
        /* the producer first: where kernels of different streams run one after the other (launch blocking,
         * profilers, sanitizers) GEMM1 then finds its rows ready instead of waiting for a dispatch behind it */
        MOK_CHECK(cuda, mok_lsa_dispatch(a, s->sms, (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, cudaStreamWaitEvent(s->side, s->fork, 0), return -1);
        MOK_CHECK(cuda, run_gemm(s, 1, set, true, s->side), return -1);
        MOK_CHECK(cuda, cudaEventRecord(s->join, s->side), return -1);
        /* joined inside the phase: a captured phase must be */
        MOK_CHECK(cuda, cudaStreamWaitEvent(st, s->join, 0), return -1);
    } else {
        MOK_CHECK(cuda, mok_lsa_dispatch(a, s->sms, (mok_stream_t)st), return -1);
    }
    return 0;
}

int lsa_forward_phase(struct lsa_state *s, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len)
{
    s->a.set = set;
    s->a.y = y;
    if (phase == 0) { /* FP8: x quantized into wire rows, then these transfers on them */
        return s->fp8 ? lsa_fp8_dispatch(s, set, st, err, err_len) : lsa_dispatch(s, &s->a, set, st, err, err_len);
    } else if (phase == 1 && s->fp8) {
        return lsa_fp8_experts(s, set, st, err, err_len);
    } else if (phase == 1) {
        if (s->layer && !s->overlap_gemm1)
            MOK_CHECK(cuda, run_gemm(s, 1, set, false, st), return -1);
        if (s->layer)
            MOK_CHECK(cuda, run_gemm(s, 2, set, false, st), return -1);
    } else if (s->a.small_paths == MOK_LSA_SMALL_FUSED) {
        MOK_CHECK(cuda, mok_lsa_combine_small(&s->a, s->sms, (mok_stream_t)st), return -1);
    } else {
        MOK_CHECK(cuda, mok_lsa_combine(&s->a, s->sms, (mok_stream_t)st), return -1);
    }
    return 0;
}

int lsa_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct lsa_state *s = state;
    uint16_t *y = mok_impl_forward_y(out, err, err_len);
    return y ? phased_run(&s->run, set, y, slot, s->cl->stream, err, err_len) : -1;
}

void lsa_phase_ms(void *state, int slot, double out[MOK_NPHASES])
{
    struct lsa_state *s = state;
    phased_run_ms(&s->run, slot, s->layer, out);
}

/* After the timed runs: overflow status, the device schedule against the host's, every chunk counter at its
 * target, and the bytes that crossed NVLink. */
int lsa_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    (void)t;
    struct lsa_state *s = state;
    struct mok_lsa_args *a = &s->a;
    int32_t status[4];
    MOK_CHECK(cuda, cudaMemcpy(status, a->status, sizeof(status), cudaMemcpyDeviceToHost), return -1);
    char overflow[256];
    if (status[0])
        snprintf(overflow, sizeof overflow, "rank %d: schedule overflow: expert %d needs %d rows but the capacity is "
                 "%d (capacity_factor %g is too small for this routing)", a->rank, status[1], status[2], status[3],
                 s->p->spec.capacity_factor);
    struct mok_schedule_view dev = {.local_experts = a->local_experts, .capacity = a->capacity,
                                    .tile_rows = a->tile_rows, .chunk_rows = a->chunk_rows, .chunks = s->nchunks,
                                    .rows = a->rows, .offset = a->offset, .entry = a->entry,
                                    .chunk_target = a->chunk_target, .ready = a->ready};
    if (sched_check_compare(&dev, &s->host, a->rank, status[0] ? overflow : NULL, err, err_len))
        return -1;
    sched_check_report(row, s->p, &s->host, a->capacity, a->combine_per_rank, s->sms);
    return 0;
}

void lsa_teardown(void *state)
{
    struct lsa_state *s = state;
    if (!s)
        return;
    cudaDeviceSynchronize();
    phased_run_destroy(&s->run);
    struct mok_lsa_args *a = &s->a;
    void *dev[] = {a->epoch, a->all_tokens, a->all_ids, a->all_w, a->rows, a->offset, a->entry, a->route_slot,
                   a->block_off, a->chunk_target, a->ready, a->status, a->xin};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
    cudaFree(s->h);
    cudaFree(s->out);
    lsa_bwd_teardown(s);
    lsa_fp8_teardown(s);
    if (s->side)
        cudaStreamDestroy(s->side);
    if (s->fork)
        cudaEventDestroy(s->fork);
    if (s->join)
        cudaEventDestroy(s->join);
    /* peers may still read my window until they finished their forward: wait for everyone first */
    MPI_Barrier(MPI_COMM_WORLD);
    if (s->win.ptr)
        mok_symmem_free(s->cl, &s->win);
    mok_schedule_free(&s->host);
    free(s);
}

const struct mok_impl_ops mok_impl_lsa = {
    .name = "lsa",
    .supports = lsa_supports,
    .setup = lsa_setup,
    .run = lsa_run,
    .phase_ms = lsa_phase_ms,
    .extras = lsa_extras,
    .teardown = lsa_teardown,
};

const struct mok_lsa_args *mok_lsa_state_args(const void *state) { return &((const struct lsa_state *)state)->a; }

void mok_lsa_state_set_timeout(void *state, long long cycles) { ((struct lsa_state *)state)->a.timeout_cycles = cycles; }

void *mok_lsa_state_window_base(const struct mok_lsa_args *a)
{
    /* the args sit inside the state: recover it to reach the window's local pointer */
    const struct lsa_state *s = (const struct lsa_state *)((const char *)a - offsetof(struct lsa_state, a));
    return s->win.ptr;
}
