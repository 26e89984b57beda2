/* nccl_extras: what the NCCL baselines measure beside a row's timed layer (nccl_common.h: mok_nccl_pipe_extras):
 * the last run's GEMMs alone and its dispatch alone, and ncclAlltoAll moving the same remote bytes as a reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_call.h"
#include "fail.h"
#include "nccl_backward.h"
#include "nccl_common.h"
#include "nccl_fp8.h"
#include "timing.h"

/* The dispatch of the last run (every stage's grouped send/recv, same messages) with nothing beside it: how
 * fast this baseline's transfers are on their own, apart from what overlapping GEMMs cost them. */
static int dispatch_once(void *ctx, int iter, char *err, int err_len)
{
    struct mok_nccl_pipe *s = ctx;
    (void)iter;
    if (s->bwd && mok_nccl_bwd_dispatch(s, err, err_len))
        return -1;
    if (!mok_pass_has_fwd(s->p->spec.pass))
        return 0;
    for (int st = 0; st < s->stages; st++)
        if (mok_nccl_p2p_chunk(s, st, true, err, err_len))
            return -1; /* a peer may now wait in NCCL: the caller aborts the job */
    return 0;
}

/* Every stage's expert GEMMs on the input set of this iteration, nothing beside them. */
static int gemms_once(void *ctx, int iter, char *err, int err_len)
{
    struct mok_nccl_pipe *s = ctx;
    int set = (iter + 2) % s->p->sets;
    if (s->bwd)
        mok_nccl_bwd_select(s, set);
    for (int st = 0; st < s->stages && mok_pass_has_fwd(s->p->spec.pass); st++)
        if (mok_nccl_run_gemms(s, set, st, err, err_len))
            return -1;
    return s->bwd ? mok_nccl_bwd_gemms(s, set, err, err_len) : 0;
}

struct a2a_run {
    struct mok_nccl_pipe *s;
    const size_t *count; /* elements per peer block, by stage */
    void *in, *out;
};

static int a2a_once(void *ctx, int iter, char *err, int err_len)
{
    struct a2a_run *r = ctx;
    (void)iter;
    /* comm mode compares with dispatch + combine: the same rows there and back */
    for (int way = 0; way < (r->s->no_compute ? 2 : 1); way++)
        for (int stage = 0; stage < r->s->stages; stage++)
            if (r->count[stage])
                MOK_CHECK(nccl, ncclAlltoAll(way ? r->out : r->in, way ? r->in : r->out, r->count[stage], ncclBfloat16,
                                             r->s->cl->nccl, r->s->cl->stream), return -1);
    return 0;
}

/* ncclAlltoAll moving what the dispatch moves, stage by stage: each stage pads every peer's block to that
 * stage's largest block over all ranks, so the reference moves at least the dispatch's remote bytes in
 * messages of the same size. */
static int time_alltoall(struct mok_nccl_pipe *s, const struct mok_alone_timing *t, double *out_ms,
                         double *remote_bytes, char *err, int err_len)
{
    const struct mok_splits *sp = &s->splits;
    int P = sp->nranks;
    *out_ms = NAN;
    *remote_bytes = NAN;
    if (P < 2)
        return 0;
    size_t *count = calloc((size_t)s->stages, sizeof(size_t)), most = 0;
    double bytes = 0;
    if (!count)
        FAIL("out of host memory");
    for (int st = 0; st < s->stages; st++) {
        long long rows = 0;
        for (int peer = 0; peer < P; peer++)
            if (peer != sp->rank && sp->send_count[st * P + peer] > rows)
                rows = sp->send_count[st * P + peer];
        /* in bf16 elements of the dispatch's rows (FP8: a wire row's bytes / 2) */
        size_t row_elems = s->fp8 ? (size_t)s->fp8->wire_bytes / 2 : (size_t)s->p->hidden;
        count[st] = (size_t)mok_allreduce_max_ll(rows) * row_elems;
        most = count[st] > most ? count[st] : most;
        bytes += (double)count[st] * 2 * (P - 1);
    }
    struct mok_symmem in, out;
    if (mok_symmem_alloc(s->cl, most * 2 * P + 16, &in, err, err_len)) {
        free(count);
        return -1;
    }
    if (mok_symmem_alloc(s->cl, most * 2 * P + 16, &out, err, err_len)) {
        mok_symmem_free(s->cl, &in);
        free(count);
        return -1;
    }
    struct a2a_run run = {s, count, in.ptr, out.ptr};
    int rc = mok_time_alone(s->cl->stream, t, a2a_once, &run, out_ms, err, err_len);
    if (!rc)
        *remote_bytes = bytes * (s->no_compute ? 2 : 1);
    free(count);
    mok_symmem_free(s->cl, &in);
    mok_symmem_free(s->cl, &out);
    return rc;
}

int mok_nccl_pipe_extras(struct mok_nccl_pipe *s, struct mok_row *row, const struct mok_alone_timing *t, char *err,
                         int err_len)
{
    double hb = (double)s->p->hidden * 2, wire = s->fp8 ? (double)s->fp8->wire_bytes : hb; /* rows out, rows back */
    row->dispatch_bytes = (double)mok_allreduce_max_ll(s->splits.remote_send_rows) * wire;
    row->combine_bytes = (double)mok_allreduce_max_ll(s->splits.remote_recv_rows) * hb;
    double gemm_ms = NAN, a2a_ms = NAN, a2a_bytes = NAN;
    if (!s->no_compute && mok_time_alone(s->compute, t, gemms_once, s, &gemm_ms, err, err_len))
        return -1;
    row->gemm_alone_us = gemm_ms * 1e3;
    double dispatch_ms = NAN;
    if (mok_time_alone(s->comm, t, dispatch_once, s, &dispatch_ms, err, err_len))
        return -1;
    row->dispatch_alone_us = dispatch_ms * 1e3;
    if (time_alltoall(s, t, &a2a_ms, &a2a_bytes, err, err_len))
        return -1;
    row->a2a_ref_us = a2a_ms * 1e3;
    row->a2a_ref_gbps = a2a_bytes / (a2a_ms * 1e-3) / 1e9;
    snprintf(row->note, sizeof(row->note), "stages=%dx%d recv_cap=%d a2a_pad_bytes=%.0f%s%s", s->chunks,
             s->expert_groups, s->cap_rows, a2a_bytes, s->fp8 && s->fp8->emulated ? "; " : "",
             s->fp8 && s->fp8->emulated ? MOK_NCCL_MX_EMULATED_NOTE : "");
    return 0;
}
