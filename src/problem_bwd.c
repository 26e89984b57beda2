/* problem_bwd: the layers' backward problem (problem.h: struct mok_layer_bwd), for pass bwd and fwd_bwd outside
 * gemm mode. The reference is kernels/reference/backward.cu (fp32 SIMT, per expert, with the forward reference's
 * bf16 roundings of gate, up and h), from the seeded inputs alone:
 *   - dx and d_router of this rank's tokens: every global expert's routes from here, remote experts' weights
 *     regenerated from the seed (as the forward's reference does), then the shared MLP's dx and the fixed-order
 *     sum over the k slots;
 *   - the weight gradients of this rank's experts: their routes from every rank, each source rank's routing, x and
 *     dy regenerated from the seed (no communication), added into the seeded start in rank order;
 *   - the shared MLP's weight gradients over this rank's tokens.
 * Shares no code with any implementation but the seeded fill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"
#include "routing.h"

/* The seeded start of the accumulated weight gradients, as gemm mode's (problem_gemm_bwd.c): of the order of one
 * step's gradient, so an implementation that overwrites instead of adding fails its check. */
static const float kGradStartScale = 0.05f;

/* dy of rank `rank`'s tokens: unit spread (the check is relative), the config's distribution and mantissa bits */
static int fill_dy(const struct mok_problem *p, int rank, uint16_t *dy, cudaStream_t st)
{
    return mok_problem_fill(&p->spec, dy, (size_t)p->tokens * p->hidden, mok_tensor_id(MOK_T_DY, (uint64_t)rank), 1.0f,
                            st);
}

void mok_problem_layer_bwd_destroy(struct mok_problem *p)
{
    struct mok_layer_bwd *b = &p->lbwd;
    for (int s = 0; s < MOK_MAX_SETS; s++)
        cudaFree(b->dy[s]);
    void *dev[] = {b->dx, b->d_router, b->dw13, b->dw2, b->dx_ref, b->d_router_ref, b->dw13_ref, b->dw2_ref};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    memset(b, 0, sizeof *b);
}

/* Routes of ids [tokens][topk] whose expert is in [e0, e1), grouped by expert in ascending (token, slot) order:
 * first[e - e0 .. e1 - e0] (prefix), token[] and route[] (t * topk + j). Host arrays; 0 or -1 (out of memory). */
struct route_lists {
    int *first;
    int32_t *token, *route;
};

static int group_routes(const int32_t *ids, int tokens, int topk, int e0, int e1, struct route_lists *out)
{
    const size_t routes = (size_t)tokens * topk;
    const int n = e1 - e0;
    out->first = calloc((size_t)n + 2, sizeof(int));
    out->token = malloc(routes * sizeof(int32_t) + 4);
    out->route = malloc(routes * sizeof(int32_t) + 4);
    int *cursor = malloc(((size_t)n + 1) * sizeof(int));
    if (!out->first || !out->token || !out->route || !cursor) {
        free(cursor);
        return -1;
    }
    for (size_t r = 0; r < routes; r++)
        if (ids[r] >= e0 && ids[r] < e1)
            out->first[ids[r] - e0 + 1]++;
    for (int e = 0; e < n; e++)
        out->first[e + 1] += out->first[e];
    memcpy(cursor, out->first, sizeof(int) * (size_t)n);
    for (size_t r = 0; r < routes; r++)
        if (ids[r] >= e0 && ids[r] < e1) {
            int slot = cursor[ids[r] - e0]++;
            out->token[slot] = (int32_t)(r / (size_t)topk);
            out->route[slot] = (int32_t)r;
        }
    free(cursor);
    return 0;
}

static void free_routes(struct route_lists *l)
{
    free(l->first);
    free(l->token);
    free(l->route);
    memset(l, 0, sizeof *l);
}

struct ref_scratch {
    float *work;               /* mok_ref_bwd_expert_f32's n x 6 x I */
    float *dx_route, *dr_drop; /* [T k][H] per-route dx; d_router of routes whose value nobody keeps */
    float *dx_shared, *ones;   /* [T][H]; [T] weight 1 of the shared MLP's rows */
    int32_t *d_token, *d_route, *iota;
    uint16_t *w13, *w2;        /* one remote expert's regenerated weights */
    uint16_t *x_q, *dy_q;      /* another rank's x and dy */
    float *w_q;                /* another rank's router weights */
};

/* Every (local) expert's routes in lists, on device copies in s. dx_route NULL: no dx (another rank's routes). */
static int ref_experts(struct mok_problem *p, cudaStream_t st, const struct route_lists *l, int e0, int e1,
                       const uint16_t *x, const uint16_t *dy, const float *w, struct ref_scratch *s, float *dx_route,
                       float *d_router, char *err, int err_len)
{
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter;
    const size_t routes = (size_t)l->first[e1 - e0];
    MOK_CHECK(cuda, cudaMemcpyAsync(s->d_token, l->token, routes * 4, cudaMemcpyHostToDevice, st), return -1);
    MOK_CHECK(cuda, cudaMemcpyAsync(s->d_route, l->route, routes * 4, cudaMemcpyHostToDevice, st), return -1);
    for (int e = e0; e < e1; e++) {
        int n = l->first[e - e0 + 1] - l->first[e - e0], row0 = l->first[e - e0];
        if (!n)
            continue;
        const int le = e - p->expert_begin;
        const bool local = le >= 0 && le < p->local_experts;
        const uint16_t *w13 = local ? p->w13[0] + (size_t)le * 2 * I * H : s->w13;
        const uint16_t *w2 = local ? p->w2[0] + (size_t)le * H * I : s->w2;
        if (!local) {
            MOK_CHECK(cuda, mok_problem_fill(&p->spec, s->w13, 2 * I * H, mok_tensor_id(MOK_T_W13, (uint64_t)e),
                                             mok_weight_scale((int)H), st), return -1);
            MOK_CHECK(cuda, mok_problem_fill(&p->spec, s->w2, H * I, mok_tensor_id(MOK_T_W2, (uint64_t)e),
                                             mok_weight_scale((int)I), st), return -1);
        }
        float *dw13 = local ? p->lbwd.dw13_ref + (size_t)le * 2 * I * H : NULL;
        float *dw2 = local ? p->lbwd.dw2_ref + (size_t)le * H * I : NULL;
        MOK_CHECK(cuda,
                  mok_ref_bwd_expert_f32(x, dy, w, s->d_token + row0, s->d_route + row0, n, (int)H, (int)I, w13, w2, 1,
                                         s->work, dx_route, dw13, dw2, d_router, (mok_stream_t)st),
                  return -1);
    }
    /* the host lists are reused by the caller: the copies above must have landed */
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

static int build_reference(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_layer_bwd *b = &p->lbwd;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    const size_t SI = (size_t)p->shared * I, EL = (size_t)p->local_experts;
    const int E = p->experts, e0 = p->expert_begin, e1 = p->expert_begin + p->local_experts;
    struct ref_scratch s = {0};
    struct route_lists l = {0};
    int32_t *h_ids = NULL, *h_iota = NULL;
    float *h_w = NULL, *h_ones = NULL;
    int rc = -1;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    /* a token routes to an expert once, so an expert has at most T rows from one source rank */
    const size_t work = T * 6 * (SI > I ? SI : I);
    MOK_CHECK(cuda, cudaEventCreate(&ev0), goto out);
    MOK_CHECK(cuda, cudaEventCreate(&ev1), goto out);
    MOK_CHECK(cuda, cudaEventRecord(ev0, st), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dx_ref, T * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->d_router_ref, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw13_ref, b->dw13_elems * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw2_ref, b->dw2_elems * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.work, work * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.dx_route, T * K * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.dr_drop, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.d_token, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.d_route, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.w13, 2 * I * H * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.w2, H * I * 2 + 16), goto out);
    if (p->spec.wgrad == MOK_WGRAD_BF16) { /* the gradient alone */
        MOK_CHECK(cuda, cudaMemsetAsync(b->dw13_ref, 0, b->dw13_elems * 4, st), goto out);
        MOK_CHECK(cuda, cudaMemsetAsync(b->dw2_ref, 0, b->dw2_elems * 4, st), goto out);
    } else { /* the seeded start the implementation adds to, plus the gradient */
        uint64_t seed = p->spec.routing.seed;
        MOK_CHECK(cuda, mok_fill_f32(b->dw13_ref, b->dw13_elems, seed, MOK_T_DW13, kGradStartScale, (mok_stream_t)st),
                  goto out);
        MOK_CHECK(cuda, mok_fill_f32(b->dw2_ref, b->dw2_elems, seed, MOK_T_DW2, kGradStartScale, (mok_stream_t)st),
                  goto out);
    }
    /* this rank's tokens over every global expert: dx rows, d_router, and the local experts' part of dW */
    if (group_routes(p->h_ids, p->tokens, p->topk, 0, E, &l))
        goto oom;
    if (ref_experts(p, st, &l, 0, E, p->x[0], b->dy[0], p->w, &s, s.dx_route, b->d_router_ref, err, err_len))
        goto out;
    free_routes(&l);
    /* the other ranks' routes to this rank's experts, from their regenerated inputs, in rank order */
    if (p->nranks > 1) {
        h_ids = malloc(T * K * sizeof(int32_t) + 4);
        h_w = malloc(T * K * sizeof(float) + 4);
        if (!h_ids || !h_w)
            goto oom;
        MOK_CHECK(cuda, cudaMalloc((void **)&s.x_q, T * H * 2 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.dy_q, T * H * 2 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.w_q, T * K * 4 + 16), goto out);
    }
    for (int q = 0; q < p->nranks; q++) {
        if (q == p->rank)
            continue;
        if (mok_routing_generate(&p->spec.routing, E, p->topk, q, p->tokens, h_ids, h_w)) {
            snprintf(err, (size_t)err_len, "backward reference: rank %d's routing could not be regenerated", q);
            goto out;
        }
        MOK_CHECK(cuda, cudaMemcpyAsync(s.w_q, h_w, T * K * 4, cudaMemcpyHostToDevice, st), goto out);
        MOK_CHECK(cuda, mok_problem_fill(&p->spec, s.x_q, T * H, mok_tensor_id(MOK_T_X, (uint64_t)q),
                                         (float)p->spec.inputs.scale, st), goto out);
        MOK_CHECK(cuda, fill_dy(p, q, s.dy_q, st), goto out);
        if (group_routes(h_ids, p->tokens, p->topk, e0, e1, &l))
            goto oom;
        if (ref_experts(p, st, &l, e0, e1, s.x_q, s.dy_q, s.w_q, &s, NULL, s.dr_drop, err, err_len))
            goto out;
        free_routes(&l);
    }
    /* the shared MLP over this rank's tokens: weight 1, its rows the tokens themselves */
    if (SI) {
        h_iota = malloc(T * sizeof(int32_t) + 4);
        h_ones = malloc(T * sizeof(float) + 4);
        if (!h_iota || !h_ones)
            goto oom;
        for (size_t t = 0; t < T; t++)
            h_iota[t] = (int32_t)t, h_ones[t] = 1.0f;
        MOK_CHECK(cuda, cudaMalloc((void **)&s.iota, T * 4 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.ones, T * 4 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.dx_shared, T * H * 4 + 16), goto out);
        MOK_CHECK(cuda, cudaMemcpyAsync(s.iota, h_iota, T * 4, cudaMemcpyHostToDevice, st), goto out);
        MOK_CHECK(cuda, cudaMemcpyAsync(s.ones, h_ones, T * 4, cudaMemcpyHostToDevice, st), goto out);
        MOK_CHECK(cuda,
                  mok_ref_bwd_expert_f32(p->x[0], b->dy[0], s.ones, s.iota, s.iota, (int)T, (int)H, (int)SI,
                                         p->shared_w13[0], p->shared_w2[0], 1, s.work, s.dx_shared,
                                         b->dw13_ref + EL * 2 * I * H, b->dw2_ref + EL * H * I, s.dr_drop,
                                         (mok_stream_t)st),
                  goto out);
    }
    MOK_CHECK(cuda, mok_ref_sum_dx(s.dx_route, (int)T, (int)K, (int)H, s.dx_shared, b->dx_ref, (mok_stream_t)st),
              goto out);
    MOK_CHECK(cuda, cudaEventRecord(ev1, st), goto out);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev0, ev1);
        p->reference_ms += ms;
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, (size_t)err_len, "backward reference: out of host memory");
out:
    cudaStreamSynchronize(st);
    free_routes(&l);
    free(h_ids);
    free(h_w);
    free(h_iota);
    free(h_ones);
    void *dev[] = {s.work, s.dx_route, s.dr_drop, s.dx_shared, s.ones, s.d_token, s.d_route, s.iota, s.w13, s.w2,
                   s.x_q, s.dy_q, s.w_q};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    return rc;
}

int mok_problem_layer_bwd_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len)
{
    struct mok_layer_bwd *b = &p->lbwd;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    const size_t SI = (size_t)p->shared * I, EL = (size_t)p->local_experts;
    b->dw13_elems = EL * 2 * I * H + 2 * SI * H;
    b->dw2_elems = EL * H * I + H * SI;
    const bool dw_bf16 = p->spec.wgrad == MOK_WGRAD_BF16; /* written in bf16, else fp32 accumulated */
    const size_t dw_size = dw_bf16 ? 2 : 4;
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&b->dy[s], T * H * 2 + 16), return -1);
        if (s == 0)
            MOK_CHECK(cuda, fill_dy(p, p->rank, b->dy[0], st), return -1);
        else
            MOK_CHECK(cuda, cudaMemcpyAsync(b->dy[s], b->dy[0], T * H * 2, cudaMemcpyDeviceToDevice, st), return -1);
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dx, T * H * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->d_router, T * K * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw13, b->dw13_elems * dw_size + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw2, b->dw2_elems * dw_size + 16), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    if (with_reference && build_reference(p, st, err, err_len))
        return -1;
    const uint64_t seed = p->spec.routing.seed;
    int n = 0;
    if (mok_pass_has_fwd(p->spec.pass))
        p->out.o[n++] = (struct mok_output){"y", MOK_OUT_BF16, p->y, p->y_ref, p->y_elems, 0.0, 0, 0, 0.0f};
    p->out.o[n++] = (struct mok_output){"dx", MOK_OUT_BF16, b->dx, b->dx_ref, T * H, 0.0, 0, 0, 0.0f};
    p->out.o[n++] = (struct mok_output){"d_router", MOK_OUT_F32, b->d_router, b->d_router_ref, T * K, 0.0, 0, 0, 0.0f};
    if (dw_bf16) { /* written: poisoned before each checked run */
        p->out.o[n++] = (struct mok_output){"dw13", MOK_OUT_BF16, b->dw13, b->dw13_ref, b->dw13_elems, 0.0, 0, 0, 0.0f};
        p->out.o[n++] = (struct mok_output){"dw2", MOK_OUT_BF16, b->dw2, b->dw2_ref, b->dw2_elems, 0.0, 0, 0, 0.0f};
    } else { /* accumulated: refilled with the seeded start before each checked run */
        p->out.o[n++] = (struct mok_output){"dw13", MOK_OUT_F32, b->dw13, b->dw13_ref, b->dw13_elems, 0.0, seed,
                                            MOK_T_DW13, kGradStartScale};
        p->out.o[n++] = (struct mok_output){"dw2", MOK_OUT_F32, b->dw2, b->dw2_ref, b->dw2_elems, 0.0, seed, MOK_T_DW2,
                                            kGradStartScale};
    }
    p->out.n = n;
    return 0;
}
