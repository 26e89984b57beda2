/* megakernel (layer mode): dispatch, GEMM1 + SwiGLU, GEMM2 and the combine sends in one persistent launch
 * (kernels/megakernel_fwd.cu), between the stream-ordered publish + schedule and the owner's sum. The phase slots
 * of the report then hold: dispatch = publish + schedule, experts = the megakernel, combine = the owner's sum.
 * Parameters: sms (comm SMs), combine, chunk_rows, stages, launch, dispatch, breakdown, raster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "lsa_state.h"
#include "stats.h"

enum { M_SMS = 0, M_COMBINE = 1, M_CHUNK = 2, M_STAGES = 3, M_LAUNCH = 4, M_DISPATCH = 5, M_BREAKDOWN = 6,
       M_RASTER = 7 };

static void mega_to_lsa_params(const int *mp, int *params)
{
    for (int i = 0; i < MOK_MAX_PARAMS; i++)
        params[i] = 0; /* copy=warp, layout=slots, dispatch=pull, small=auto (unused), reduce=after */
    params[P_SMS] = mp[M_SMS], params[P_COMBINE] = mp[M_COMBINE], params[P_TILE] = 128, params[P_CHUNK] = mp[M_CHUNK];
    params[P_LAUNCH] = mp[M_LAUNCH];
    params[P_LAYOUT] = params[P_DISPATCH] = mp[M_DISPATCH]; /* push lands rows once per rank: layout=landing */
}

static int mega_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *mp, char *why,
                         int why_len)
{
    int params[MOK_MAX_PARAMS];
    mega_to_lsa_params(mp, params);
    if (!lsa_supports(p, cl, params, why, why_len))
        return 0;
    int sms = 0, major = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cl->device);
    if (major != 9) {
        snprintf(why, (size_t)why_len, "the megakernel's GEMMs are sm_90a (wgmma, TMA); this GPU is sm_%d0", major);
        return 0;
    }
    if (mp[M_SMS] >= sms) {
        snprintf(why, (size_t)why_len, "sms %d: fewer than the GPU's %d SMs (the rest compute)", mp[M_SMS], sms);
        return 0;
    }
    if (p->hidden % 256 || p->inter % 128 || p->local_experts > 1024) {
        snprintf(why, (size_t)why_len, "hidden %d must be a multiple of 256, intermediate %d of 128, and at most 1024 "
                 "local experts", p->hidden, p->inter);
        return 0;
    }
    if (mp[M_STAGES] && (mp[M_STAGES] < 2 || mp[M_STAGES] > 3)) {
        snprintf(why, (size_t)why_len, "stages %d: 0 (as many as fit) or 2..3 (beside 64 KiB of C staging)",
                 mp[M_STAGES]);
        return 0;
    }
    return 1;
}

static int mega_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *mp, int max_slots,
                      char *err, int err_len)
{
    int params[MOK_MAX_PARAMS];
    mega_to_lsa_params(mp, params);
    if (lsa_setup(state, p, cl, params, max_slots, err, err_len))
        return -1;
    struct lsa_state *s = *state;
    s->layer = true; /* three phases, the middle one not empty */
    s->mega = true;
    s->breakdown = mp[M_BREAKDOWN] == 1;
    size_t cap = (size_t)s->a.capacity;
    if (!s->a.xin) /* dispatch=push (layout=landing): rows land in the window; the slots GEMM1 reads are ours */
        CUDA(cudaMalloc((void **)&s->a.xin, cap * p->hidden * 2 + 16));
    CUDA(cudaMalloc((void **)&s->h, cap * p->inter * 2 + 16));
    CUDA(cudaMalloc((void **)&s->out, cap * p->hidden * 2 + 16));
    s->a.expert_out = s->out;
    s->mk = (struct mok_mega_args){.lsa = s->a, .w13 = p->w13[0], .w2 = p->w2[0], .h = s->h, .out = s->out,
                                   .inter = p->inter, .comm_blocks = mp[M_SMS], .stages = mp[M_STAGES],
                                   .raster = mp[M_RASTER]};
    size_t tmax = (size_t)s->a.t_max;
    CUDA(cudaMalloc((void **)&s->mk.done,
                    sizeof(int32_t) * mok_megakernel_counters((int)cap, (int)tmax, p->shared * p->inter)));
    if (p->shared) { /* one MLP of shared x intermediate columns over the own tokens (as the reference) */
        s->mk.shared_inter = p->shared * p->inter;
        CUDA(cudaMalloc((void **)&s->mk.sh, tmax * (size_t)s->mk.shared_inter * 2 + 16));
        CUDA(cudaMalloc((void **)&s->mk.sy, tmax * (size_t)p->hidden * 2 + 16));
        mega_forward_args(s, 0); /* so that supports() sees complete shared arguments */
    }
    char why[256];
    if (!mok_megakernel_supports(&s->mk, why, sizeof why))
        FAIL("megakernel: %s", why);
    mok_megakernel_prepare((mok_stream_t)cl->stream); /* its failure record, before any graph capture */
    return 0;
}

/* The breakdown: the same kernel with communication skipped (compute alone, on the same compute blocks, over the
 * rows the last full forward left in the slots) and with compute skipped (publish + schedule, dispatch, combine
 * sends and the owner's sum, GEMM2 counted done at once). Median of per-iteration times over `iters` runs after 2
 * warm-ups, then the maximum over ranks; y is garbage afterwards (the driver's checks ran before). */
static int mega_variant_ms(struct lsa_state *s, int skip, int iters, double *out_ms, char *err, int err_len)
{
    cudaStream_t st = s->cl->stream;
    cudaEvent_t t0, t1;
    CUDA(cudaEventCreate(&t0));
    CUDA(cudaEventCreate(&t1));
    double *ms = calloc((size_t)iters, sizeof(double));
    if (!ms)
        FAIL("out of host memory");
    for (int i = -2; i < iters; i++) {
        CUDA(cudaEventRecord(t0, st));
        mega_forward_args(s, 0);
        s->mk.skip = skip;
        if (skip == 2) { /* the whole communication path: flags and epochs advance as in a forward */
            CUDA(mok_lsa_publish(&s->a, (mok_stream_t)st));
            CUDA(mok_lsa_schedule(&s->a, (mok_stream_t)st));
        }
        int rc = mok_megakernel_fwd(&s->mk, (mok_stream_t)st);
        s->mk.skip = 0;
        CUDA(rc);
        if (skip == 2) {
            struct mok_lsa_args r = mega_reduce_args(s);
            CUDA(mok_lsa_reduce(&r, (mok_stream_t)st));
        }
        CUDA(cudaEventRecord(t1, st));
        CUDA(cudaEventSynchronize(t1));
        float f = 0;
        CUDA(cudaEventElapsedTime(&f, t0, t1));
        if (i >= 0)
            ms[i] = f;
    }
    struct mok_stats stats;
    mok_stats_compute(ms, iters, &stats);
    free(ms);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    MPI_Allreduce(&stats.median, out_ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return 0;
}

static int mega_extras(void *state, struct mok_row *row, int iters, char *err, int err_len)
{
    struct lsa_state *s = state;
    if (lsa_extras(state, row, iters, err, err_len)) /* the schedule check reads the last full forward's state */
        return -1;
    if (!s->breakdown) {
        snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
                 " fused (phases: schedule | kernel | owner's sum)");
        return 0;
    }
    double compute_ms = 0, comm_ms = 0;
    int n = iters < 3 ? 3 : iters;
    if (mega_variant_ms(s, 1, n, &compute_ms, err, err_len) || mega_variant_ms(s, 2, n, &comm_ms, err, err_len))
        return -1;
    row->gemm_alone_us = compute_ms * 1e3;   /* the kernel with communication skipped */
    row->dispatch_alone_us = comm_ms * 1e3;  /* the forward with compute skipped */
    double exposed = row->time_med_us - row->gemm_alone_us;
    snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
             " fused (phases: schedule | kernel | owner's sum); compute alone %.0f us, comm alone %.0f us, exposed "
             "comm %.0f us (%.0f%%)",
             row->gemm_alone_us, row->dispatch_alone_us, exposed,
             row->time_med_us > 0 ? 100.0 * exposed / row->time_med_us : 0.0);
    return 0;
}

const struct mok_impl_ops mok_impl_megakernel = {
    .name = "megakernel",
    .supports = mega_supports,
    .setup = mega_setup,
    .run = lsa_run,
    .phase_ms = lsa_phase_ms,
    .extras = mega_extras,
    .teardown = lsa_teardown,
};
