/* cublas-gemm (gemm mode): the expert GEMMs of a problem on cuBLAS, as the NCCL baselines run them (grouped or
 * per expert over several streams), timed GEMM1 + SwiGLU and GEMM2 apart: the reference mok-gemm is held to. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gemm_cublas.h"
#include "impl.h"

enum { P_GEMM = 0, P_STREAMS = 1 };

struct cg_state {
    struct mok_problem *p;
    cudaStream_t st;
    struct mok_expert_gemms gemms;
    struct mok_gemm_group *groups;
    int ngroups, max_slots;
    uint16_t *g1, *h;
    cudaEvent_t *ev; /* [slots][3] */
};

static int cg_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                       int why_len)
{
    (void)p, (void)cl;
    if (params[P_GEMM] == MOK_GEMM_GROUPED && params[P_STREAMS] != 1) {
        snprintf(why, (size_t)why_len, "gemm=grouped is one call per GEMM: gemm_streams must be 1");
        return 0;
    }
    return 1;
}

static void cg_teardown(void *state);

static int cg_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                    char *err, int err_len)
{
    struct cg_state *s = calloc(1, sizeof(*s));
    *state = s;
    if (!s || !(s->groups = calloc((size_t)p->experts, sizeof(*s->groups))) ||
        !(s->ev = calloc((size_t)max_slots * 3 + 1, sizeof(cudaEvent_t)))) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    s->p = p;
    s->st = cl->stream;
    s->max_slots = max_slots;
    for (int e = 0; e < p->experts; e++) { /* cuBLAS needs the group sizes on the host: the routing gives them */
        int rows = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e];
        if (rows)
            s->groups[s->ngroups++] = (struct mok_gemm_group){e, p->h_gemm_offset[e], rows};
    }
    int rc = mok_expert_gemms_init(&s->gemms, (enum mok_gemm_mode)params[P_GEMM], params[P_STREAMS], 0,
                                   p->experts, 1);
    cudaError_t ce = cudaSuccess;
    if (!rc)
        ce = cudaMalloc((void **)&s->g1, (size_t)p->gemm_rows * 2 * p->inter * 2 + 16);
    if (!rc && ce == cudaSuccess)
        ce = cudaMalloc((void **)&s->h, (size_t)p->gemm_rows * p->inter * 2 + 16);
    for (int i = 0; !rc && ce == cudaSuccess && i < max_slots * 3; i++)
        ce = cudaEventCreate(&s->ev[i]);
    if (rc || ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "cublas-gemm setup: %s", rc ? "cuBLAS init failed" : cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

static int cg_run(void *state, int set, uint16_t *y, int slot, char *err, int err_len)
{
    struct cg_state *s = state;
    struct mok_problem *p = s->p;
    bool timed = slot >= 0 && slot < s->max_slots;
    for (int part = 1; part <= 2; part++) { /* GEMM1 + SwiGLU, then GEMM2, each between two events */
        if (timed)
            cudaEventRecord(s->ev[slot * 3 + part - 1], s->st);
        s->gemms.parts = part;
        int rc = mok_expert_gemms_run(&s->gemms, s->st, 0, s->groups, s->ngroups, p->w13[set], p->w2[set],
                                      p->hidden, p->inter, p->gemm_a[set], s->g1, s->h, y);
        if (rc) {
            snprintf(err, (size_t)err_len, "cublas-gemm part %d: status %d", part, rc);
            return -1;
        }
    }
    if (timed)
        cudaEventRecord(s->ev[slot * 3 + 2], s->st);
    return 0;
}

static void cg_phase_ms(void *state, int slot, double out[MOK_NPHASES])
{
    struct cg_state *s = state;
    if (slot < 0 || slot >= s->max_slots)
        return;
    float a = 0, b = 0;
    if (cudaEventElapsedTime(&a, s->ev[slot * 3], s->ev[slot * 3 + 1]) == cudaSuccess &&
        cudaEventElapsedTime(&b, s->ev[slot * 3 + 1], s->ev[slot * 3 + 2]) == cudaSuccess) {
        out[MOK_PHASE_GEMM1] = a;
        out[MOK_PHASE_GEMM2] = b;
    }
}

static void cg_teardown(void *state)
{
    struct cg_state *s = state;
    if (!s)
        return;
    cudaDeviceSynchronize();
    if (s->gemms.handle)
        mok_expert_gemms_destroy(&s->gemms);
    for (int i = 0; s->ev && i < s->max_slots * 3; i++)
        if (s->ev[i])
            cudaEventDestroy(s->ev[i]);
    cudaFree(s->g1);
    cudaFree(s->h);
    free(s->ev);
    free(s->groups);
    free(s);
}

const struct mok_impl_ops mok_impl_cublas_gemm = {
    .name = "cublas-gemm",
    .supports = cg_supports,
    .setup = cg_setup,
    .run = cg_run,
    .phase_ms = cg_phase_ms,
    .teardown = cg_teardown,
};
