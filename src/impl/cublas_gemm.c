/* cublas-gemm (gemm mode): the expert GEMMs of a problem on cuBLAS, as the NCCL baselines run them (grouped or
 * per expert over several streams), timed GEMM1 + SwiGLU and GEMM2 apart: the reference mok-gemm is held to.
 * pass bwd: their backward per expert (gemm_cublas.h: mok_expert_gemms_backward), timed whole; fwd_bwd: the
 * forward, then the backward from the gate/up rows it kept. dtype fp8_block: the forward per expert on cuBLASLt's
 * block-scaled FP8 GEMMs (gemm_fp8_experts.h). dtype mxfp8: emulated (no Hopper library runs MX GEMMs): dequantize to
 * bf16, then the bf16 GEMMs (gemm_mx_emulated.h), labelled so in the report's note. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_cublas.h"
#include "gemm_fp8_experts.h"
#include "gemm_mx_emulated.h"
#include "impl.h"
#include "params.h"
#include "slot_events.h"

struct cg_state {
    struct mok_problem *p;
    cudaStream_t st;
    struct mok_expert_gemms gemms;
    struct mok_gemm_group *groups;
    int ngroups;
    uint16_t *g1, *h;
    uint16_t *dhp, *dgu, *hw; /* pass bwd: dh', [dg, du], w h */
    struct mok_slot_events ev; /* marks: start, GEMM1 done, GEMM2 done (bwd: start and end) */
    struct mok_fp8_experts fp8; /* dtype fp8_block (zeroed otherwise: its destroy is a no-op) */
    struct mok_mx_emulated mx;  /* dtype mxfp8 (likewise) */
};

/* Everything cublas-gemm can be asked is decided without the GPU (host_supports.c). */
static int cg_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                       int why_len)
{
    (void)p, (void)cl, (void)params, (void)why, (void)why_len;
    return 1;
}

static void cg_teardown(void *state);

static int cg_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                    char *err, int err_len)
{
    struct cg_state *s = calloc(1, sizeof(*s));
    *state = s;
    if (!s || !(s->groups = calloc((size_t)p->experts, sizeof(*s->groups)))) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    s->p = p;
    s->st = cl->stream;
    for (int e = 0; e < p->experts; e++) { /* cuBLAS needs the group sizes on the host: the routing gives them */
        int rows = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e];
        if (rows)
            s->groups[s->ngroups++] = (struct mok_gemm_group){e, p->h_gemm_offset[e], rows};
    }
    struct mok_params_cublas_gemm cp = mok_params_cublas_gemm(params);
    /* two pointer-array batches: the mxfp8 emulation's GEMM1 and GEMM2 calls pass different rows, and a batch's
     * host array must not be rewritten with other rows while its copy may still be queued (gemm_mx_emulated.c;
     * the bf16 path's two calls write the same pointers, so it keeps to batch 0) */
    int rc = mok_expert_gemms_init(&s->gemms, (enum mok_gemm_mode)cp.gemm, cp.gemm_streams, 0, p->experts, 2);
    cudaError_t ce = cudaSuccess;
    if (!rc)
        ce = cudaMalloc((void **)&s->g1, (size_t)p->gemm_rows * 2 * p->inter * 2 + 16);
    if (!rc && ce == cudaSuccess)
        ce = cudaMalloc((void **)&s->h, (size_t)p->gemm_rows * p->inter * 2 + 16);
    if (!rc && ce == cudaSuccess && mok_pass_has_bwd(p->spec.pass)) {
        size_t rows = (size_t)p->gemm_rows, I = (size_t)p->inter;
        ce = cudaMalloc((void **)&s->dhp, rows * I * 2 + 16);
        if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&s->dgu, rows * 2 * I * 2 + 16);
        if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&s->hw, rows * I * 2 + 16);
    }
    if (!rc && ce == cudaSuccess)
        ce = mok_slot_events_create(&s->ev, max_slots, 3);
    if (!rc && ce == cudaSuccess && p->spec.dtype == MOK_DTYPE_FP8_BLOCK) {
        if (mok_fp8_experts_init(&s->fp8, &s->gemms, p, s->groups, s->ngroups, s->st, err, err_len))
            return -1;
    }
    if (!rc && ce == cudaSuccess && p->spec.dtype == MOK_DTYPE_MXFP8 &&
        mok_mx_emulated_init(&s->mx, p, s->st, err, err_len))
        return -1;
    if (rc || ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "cublas-gemm setup: %s", rc ? "cuBLAS init failed" : cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

/* pass bwd from the problem's saved gu; fwd_bwd from the gu its own forward (cg_run_forward) left in g1 */
static int cg_run_backward(struct cg_state *s, int set, const struct mok_outputs *out, int slot, char *err,
                           int err_len)
{
    struct mok_problem *p = s->p;
    const uint16_t *gu = p->spec.pass == MOK_PASS_FWD_BWD ? s->g1 : p->bwd.gu;
    struct mok_expert_bwd b; /* both parts, the whole gradient in one call */
    if (mok_impl_gemm_bwd_operands(p, set, gu, s->dhp, s->dgu, s->hw, out, "cublas-gemm", &b, err, err_len))
        return -1;
    bool timed = mok_slot_events_timed(&s->ev, slot) && p->spec.pass == MOK_PASS_BWD;
    if (timed)
        mok_slot_events_record(&s->ev, slot, 0, s->st);
    int rc = mok_expert_gemms_backward(&s->gemms, s->st, s->groups, s->ngroups, p->hidden, p->inter, &b);
    if (rc) {
        snprintf(err, (size_t)err_len, "cublas-gemm backward: status %d", rc);
        return -1;
    }
    if (timed)
        mok_slot_events_record(&s->ev, slot, 2, s->st);
    return 0;
}

static int cg_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct cg_state *s = state;
    struct mok_problem *p = s->p;
    if (p->spec.pass == MOK_PASS_BWD)
        return cg_run_backward(s, set, out, slot, err, err_len);
    uint16_t *y = mok_impl_forward_y(out, err, err_len);
    if (!y)
        return -1;
    bool timed = mok_slot_events_timed(&s->ev, slot) && p->spec.pass == MOK_PASS_FWD;
    for (int part = 1; part <= 2; part++) { /* GEMM1 + SwiGLU, then GEMM2, each between two events */
        if (timed)
            mok_slot_events_record(&s->ev, slot, part - 1, s->st);
        s->gemms.parts = part;
        if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK) {
            if (mok_fp8_experts_run(&s->fp8, &s->gemms, s->st, part, p, set, s->groups, s->ngroups,
                                    mok_output_bf16(out, "h"), y, err, err_len))
                return -1;
            continue;
        }
        if (p->spec.dtype == MOK_DTYPE_MXFP8) {
            if (mok_mx_emulated_run(&s->mx, &s->gemms, s->st, part, p, set, s->groups, s->ngroups,
                                    mok_output_bf16(out, "h"), y, err, err_len))
                return -1;
            continue;
        }
        int rc = mok_expert_gemms_run(&s->gemms, s->st, 0, s->groups, s->ngroups, p->w13[set], p->w2[set],
                                      p->hidden, p->inter, p->gemm_a[set], s->g1, s->h, y);
        if (rc) {
            snprintf(err, (size_t)err_len, "cublas-gemm part %d: status %d", part, rc);
            return -1;
        }
    }
    if (timed)
        mok_slot_events_record(&s->ev, slot, 2, s->st);
    /* fwd_bwd: the backward from the g1 (GEMM1's bf16 output) this forward left, as a training step keeps it */
    return p->spec.pass == MOK_PASS_FWD_BWD ? cg_run_backward(s, set, out, slot, err, err_len) : 0;
}

static void cg_phase_ms(void *state, int slot, double out[MOK_NPHASES])
{
    struct cg_state *s = state;
    float a = 0, b = 0;
    if (s->p->spec.pass != MOK_PASS_FWD)
        return; /* the backward's experts' steps interleave: no GEMM phases apart */
    if (mok_slot_events_ms(&s->ev, slot, 0, &a) && mok_slot_events_ms(&s->ev, slot, 1, &b)) {
        out[MOK_PHASE_GEMM1] = a;
        out[MOK_PHASE_GEMM2] = b;
    }
}

/* The report says what an mxfp8 row of this implementation is: not an MX GEMM */
static int cg_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    struct cg_state *s = state;
    (void)t, (void)err, (void)err_len;
    if (s->p->spec.dtype == MOK_DTYPE_MXFP8) {
        size_t used = strlen(row->note);
        snprintf(row->note + used, sizeof(row->note) - used, "%s%s", used ? "; " : "", MOK_MX_EMULATED_NOTE);
    }
    return 0;
}

static void cg_teardown(void *state)
{
    struct cg_state *s = state;
    if (!s)
        return;
    cudaDeviceSynchronize();
    if (s->gemms.handle)
        mok_expert_gemms_destroy(&s->gemms);
    mok_slot_events_destroy(&s->ev);
    mok_fp8_experts_destroy(&s->fp8);
    mok_mx_emulated_destroy(&s->mx);
    cudaFree(s->g1);
    cudaFree(s->h);
    cudaFree(s->dhp);
    cudaFree(s->dgu);
    cudaFree(s->hw);
    free(s->groups);
    free(s);
}

const struct mok_impl_ops mok_impl_cublas_gemm = {
    .name = "cublas-gemm",
    .supports = cg_supports,
    .setup = cg_setup,
    .run = cg_run,
    .phase_ms = cg_phase_ms,
    .extras = cg_extras,
    .teardown = cg_teardown,
};
