/* problem_bwd: the layers' backward problem (problem.h: struct mok_layer_bwd), for pass bwd and fwd_bwd outside
 * gemm mode. The reference is kernels/reference/backward.cu (fp32 SIMT, per expert, with the forward reference's
 * bf16 roundings of gate, up and h), from the seeded inputs alone:
 *   - dx and d_router of this rank's tokens: every global expert's routes from here, remote experts' weights
 *     regenerated from the seed (as the forward's reference does), then the shared MLP's dx and the fixed-order
 *     sum over the k slots;
 *   - the weight gradients of this rank's experts: their routes from every rank, each source rank's routing, x and
 *     dy regenerated from the seed (no communication), added into the seeded start in rank order;
 *   - the shared MLP's weight gradients over this rank's tokens.
 * The weight gradients' reference is built on the device a part of the local experts at a time (plan.c:
 * mok_plan_ref_part_experts) and kept in pinned host memory, where the check reads it back in parts (check.c): a
 * second fp32 copy of DeepSeek-V3's 256 experts' gradients on the device (45 GB) would not leave room for the
 * problem on an 80 GB GPU. Shares no code with any implementation but the seeded fill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "plan.h"
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
    void *dev[] = {b->dx, b->d_router, b->dw13, b->dw2, b->dx_ref, b->d_router_ref};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    cudaFreeHost(b->dw13_ref.v);
    cudaFreeHost(b->dw2_ref.v);
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
    float *part13, *part2;     /* one part of the weight gradients' reference */
    struct mok_check_sums *stats; /* [2]: dW13's and dW2's max |ref| and sum ref^2, over the parts */
};

/* Where ref_experts adds the weight gradients: the part holding global experts [e0, e0 + n); NULL: nowhere */
struct grad_part {
    float *dw13, *dw2;
    int e0;
};

/* The experts [ea, eb) of list l (which holds the routes of experts [base, ...)), on device copies in s.
 * dx_route NULL: no dx (another rank's routes). */
static int ref_experts(struct mok_problem *p, cudaStream_t st, const struct route_lists *l, int base, int ea, int eb,
                       const uint16_t *x, const uint16_t *dy, const float *w, struct ref_scratch *s, float *dx_route,
                       float *d_router, const struct grad_part *g, char *err, int err_len)
{
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter;
    const size_t r0 = (size_t)l->first[ea - base], routes = (size_t)l->first[eb - base] - r0;
    if (!routes)
        return 0;
    MOK_CHECK(cuda, cudaMemcpyAsync(s->d_token + r0, l->token + r0, routes * 4, cudaMemcpyHostToDevice, st), return -1);
    MOK_CHECK(cuda, cudaMemcpyAsync(s->d_route + r0, l->route + r0, routes * 4, cudaMemcpyHostToDevice, st), return -1);
    for (int e = ea; e < eb; e++) {
        int n = l->first[e - base + 1] - l->first[e - base], row0 = l->first[e - base];
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
        float *dw13 = g ? g->dw13 + (size_t)(e - g->e0) * 2 * I * H : NULL;
        float *dw2 = g ? g->dw2 + (size_t)(e - g->e0) * H * I : NULL;
        MOK_CHECK(cuda,
                  mok_ref_bwd_expert_f32(x, dy, w, s->d_token + row0, s->d_route + row0, n, (int)H, (int)I, w13, w2, 1,
                                         s->work, dx_route, dw13, dw2, d_router, (mok_stream_t)st),
                  return -1);
    }
    /* the host lists are reused by the caller: the copies above must have landed */
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

/* Elements [at, at + n) of a weight gradient's reference: the start (zeros, or the seeded start of an accumulated
 * gradient) into the part, before any route adds to it */
static int start_part(const struct mok_problem *p, float *part, size_t n, size_t at, uint64_t tensor, cudaStream_t st)
{
    if (p->spec.wgrad == MOK_WGRAD_BF16) /* the gradient alone */
        return (int)cudaMemsetAsync(part, 0, n * 4, st);
    return mok_fill_f32_part(part, n, at, p->spec.routing.seed, tensor, kGradStartScale, (mok_stream_t)st);
}

/* A finished part: its statistics added into *stats, then to the host reference at element at */
static int keep_part(const float *part, size_t n, float *host, size_t at, struct mok_check_sums *stats,
                     cudaStream_t st)
{
    int rc = mok_check_ref_stats(part, n, stats, (mok_stream_t)st);
    return rc ? rc : (int)cudaMemcpyAsync(host + at, part, n * 4, cudaMemcpyDeviceToHost, st);
}

/* Another rank q's routing, x, dy and router weights, regenerated from the seed into s and *l (its routes to the
 * experts [e0, e1)) */
static int regenerate_rank(struct mok_problem *p, int q, int e0, int e1, int32_t *h_ids, float *h_w,
                           struct ref_scratch *s, struct route_lists *l, cudaStream_t st, char *err, int err_len)
{
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, K = (size_t)p->topk;
    if (mok_routing_generate(&p->spec.routing, p->experts, p->topk, q, p->tokens, h_ids, h_w)) {
        snprintf(err, (size_t)err_len, "backward reference: rank %d's routing could not be regenerated", q);
        return -1;
    }
    MOK_CHECK(cuda, cudaMemcpyAsync(s->w_q, h_w, T * K * 4, cudaMemcpyHostToDevice, st), return -1);
    MOK_CHECK(cuda, mok_problem_fill(&p->spec, s->x_q, T * H, mok_tensor_id(MOK_T_X, (uint64_t)q),
                                     (float)p->spec.inputs.scale, st), return -1);
    MOK_CHECK(cuda, fill_dy(p, q, s->dy_q, st), return -1);
    /* h_w is read by the copy above: it must land before the caller regenerates into it again */
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    if (group_routes(h_ids, p->tokens, p->topk, e0, e1, l)) {
        snprintf(err, (size_t)err_len, "backward reference: out of host memory");
        return -1;
    }
    return 0;
}

static int build_reference(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_layer_bwd *b = &p->lbwd;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    const size_t SI = (size_t)p->shared * I, EL = (size_t)p->local_experts;
    const int E = p->experts, e0 = p->expert_begin, e1 = p->expert_begin + p->local_experts;
    const int per_part = mok_plan_ref_part_experts(p->local_experts, p->hidden, p->inter);
    const size_t part13 = (size_t)per_part * 2 * I * H > 2 * SI * H ? (size_t)per_part * 2 * I * H : 2 * SI * H;
    const size_t part2 = (size_t)per_part * H * I > H * SI ? (size_t)per_part * H * I : H * SI;
    struct ref_scratch s = {0};
    struct route_lists own = {0}, l = {0};
    int32_t *h_ids = NULL, *h_iota = NULL;
    float *h_w = NULL, *h_ones = NULL;
    struct mok_check_sums h_stats[2];
    int rc = -1;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    /* a token routes to an expert once, so an expert has at most T rows from one source rank */
    const size_t work = T * 6 * (SI > I ? SI : I);
    MOK_CHECK(cuda, cudaEventCreate(&ev0), goto out);
    MOK_CHECK(cuda, cudaEventCreate(&ev1), goto out);
    MOK_CHECK(cuda, cudaEventRecord(ev0, st), goto out);
    if (cudaMallocHost((void **)&b->dw13_ref.v, b->dw13_elems * 4 + 16) != cudaSuccess ||
        cudaMallocHost((void **)&b->dw2_ref.v, b->dw2_elems * 4 + 16) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, (size_t)err_len,
                 "backward reference: cannot pin %.2f GiB of host memory for the weight gradients' references "
                 "(run with --no-check, or fewer experts per rank)",
                 (double)(b->dw13_elems + b->dw2_elems) * 4 / (1 << 30));
        goto out;
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dx_ref, T * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->d_router_ref, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.part13, part13 * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.part2, part2 * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.stats, 2 * sizeof(struct mok_check_sums)), goto out);
    MOK_CHECK(cuda, cudaMemsetAsync(s.stats, 0, 2 * sizeof(struct mok_check_sums), st), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.work, work * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.dx_route, T * K * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.dr_drop, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.d_token, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.d_route, T * K * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.w13, 2 * I * H * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&s.w2, H * I * 2 + 16), goto out);
    if (p->nranks > 1) {
        h_ids = malloc(T * K * sizeof(int32_t) + 4);
        h_w = malloc(T * K * sizeof(float) + 4);
        if (!h_ids || !h_w)
            goto oom;
        MOK_CHECK(cuda, cudaMalloc((void **)&s.x_q, T * H * 2 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.dy_q, T * H * 2 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&s.w_q, T * K * 4 + 16), goto out);
    }
    /* this rank's tokens over every global expert: dx rows and d_router; the other experts' first */
    if (group_routes(p->h_ids, p->tokens, p->topk, 0, E, &own))
        goto oom;
    if (ref_experts(p, st, &own, 0, 0, e0, p->x[0], b->dy[0], p->w, &s, s.dx_route, b->d_router_ref, NULL, err,
                    err_len) ||
        ref_experts(p, st, &own, 0, e1, E, p->x[0], b->dy[0], p->w, &s, s.dx_route, b->d_router_ref, NULL, err,
                    err_len))
        goto out;
    /* the local experts a part at a time: the part's start, this rank's routes to it (dx and d_router too), then
     * the other ranks' routes from their regenerated inputs, in rank order; then the part to the host */
    for (int c0 = e0; c0 < e1; c0 += per_part) {
        const int c1 = c0 + per_part < e1 ? c0 + per_part : e1;
        const size_t n13 = (size_t)(c1 - c0) * 2 * I * H, n2 = (size_t)(c1 - c0) * H * I;
        const size_t at13 = (size_t)(c0 - e0) * 2 * I * H, at2 = (size_t)(c0 - e0) * H * I;
        const struct grad_part g = {s.part13, s.part2, c0};
        MOK_CHECK(cuda, start_part(p, s.part13, n13, at13, MOK_T_DW13, st), goto out);
        MOK_CHECK(cuda, start_part(p, s.part2, n2, at2, MOK_T_DW2, st), goto out);
        if (ref_experts(p, st, &own, 0, c0, c1, p->x[0], b->dy[0], p->w, &s, s.dx_route, b->d_router_ref, &g, err,
                        err_len))
            goto out;
        for (int q = 0; q < p->nranks; q++) {
            if (q == p->rank)
                continue;
            if (regenerate_rank(p, q, c0, c1, h_ids, h_w, &s, &l, st, err, err_len) ||
                ref_experts(p, st, &l, c0, c0, c1, s.x_q, s.dy_q, s.w_q, &s, NULL, s.dr_drop, &g, err, err_len))
                goto out;
            free_routes(&l);
        }
        MOK_CHECK(cuda, keep_part(s.part13, n13, b->dw13_ref.v, at13, &s.stats[0], st), goto out);
        MOK_CHECK(cuda, keep_part(s.part2, n2, b->dw2_ref.v, at2, &s.stats[1], st), goto out);
    }
    free_routes(&own);
    /* the shared MLP over this rank's tokens: weight 1, its rows the tokens themselves; its weight gradients after
     * the local experts' */
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
        MOK_CHECK(cuda, start_part(p, s.part13, 2 * SI * H, EL * 2 * I * H, MOK_T_DW13, st), goto out);
        MOK_CHECK(cuda, start_part(p, s.part2, H * SI, EL * H * I, MOK_T_DW2, st), goto out);
        MOK_CHECK(cuda,
                  mok_ref_bwd_expert_f32(p->x[0], b->dy[0], s.ones, s.iota, s.iota, (int)T, (int)H, (int)SI,
                                         p->shared_w13[0], p->shared_w2[0], 1, s.work, s.dx_shared, s.part13, s.part2,
                                         s.dr_drop, (mok_stream_t)st),
                  goto out);
        MOK_CHECK(cuda, keep_part(s.part13, 2 * SI * H, b->dw13_ref.v, EL * 2 * I * H, &s.stats[0], st), goto out);
        MOK_CHECK(cuda, keep_part(s.part2, H * SI, b->dw2_ref.v, EL * H * I, &s.stats[1], st), goto out);
    }
    MOK_CHECK(cuda, mok_ref_sum_dx(s.dx_route, (int)T, (int)K, (int)H, s.dx_shared, b->dx_ref, (mok_stream_t)st),
              goto out);
    MOK_CHECK(cuda, cudaMemcpyAsync(h_stats, s.stats, sizeof h_stats, cudaMemcpyDeviceToHost, st), goto out);
    MOK_CHECK(cuda, cudaEventRecord(ev1, st), goto out);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    b->dw13_ref.sq = h_stats[0].ref_sq, b->dw13_ref.amax = h_stats[0].ref_amax;
    b->dw2_ref.sq = h_stats[1].ref_sq, b->dw2_ref.amax = h_stats[1].ref_amax;
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
    free_routes(&own);
    free_routes(&l);
    free(h_ids);
    free(h_w);
    free(h_iota);
    free(h_ones);
    void *dev[] = {s.work, s.dx_route, s.dr_drop, s.dx_shared, s.ones, s.d_token, s.d_route, s.iota, s.w13, s.w2,
                   s.x_q, s.dy_q, s.w_q, s.part13, s.part2, s.stats};
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
        p->out.o[n++] =
            (struct mok_output){.name = "y", .type = MOK_OUT_BF16, .data = p->y, .ref = p->y_ref, .elems = p->y_elems};
    p->out.o[n++] =
        (struct mok_output){.name = "dx", .type = MOK_OUT_BF16, .data = b->dx, .ref = b->dx_ref, .elems = T * H};
    p->out.o[n++] = (struct mok_output){.name = "d_router", .type = MOK_OUT_F32, .data = b->d_router,
                                        .ref = b->d_router_ref, .elems = T * K};
    /* bf16: written, poisoned before each checked run; fp32: accumulated, refilled with the seeded start */
    const enum mok_out_type dw_type = dw_bf16 ? MOK_OUT_BF16 : MOK_OUT_F32;
    const uint64_t init_seed = dw_bf16 ? 0 : seed, id13 = dw_bf16 ? 0 : MOK_T_DW13, id2 = dw_bf16 ? 0 : MOK_T_DW2;
    const float start = dw_bf16 ? 0.0f : kGradStartScale;
    p->out.o[n++] = (struct mok_output){.name = "dw13", .type = dw_type, .data = b->dw13, .ref = NULL,
                                        .elems = b->dw13_elems, .init_seed = init_seed, .init_id = id13,
                                        .init_scale = start, .ref_host = b->dw13_ref.v, .ref_sq = b->dw13_ref.sq,
                                        .ref_amax = b->dw13_ref.amax};
    p->out.o[n++] = (struct mok_output){.name = "dw2", .type = dw_type, .data = b->dw2, .ref = NULL,
                                        .elems = b->dw2_elems, .init_seed = init_seed, .init_id = id2,
                                        .init_scale = start, .ref_host = b->dw2_ref.v, .ref_sq = b->dw2_ref.sq,
                                        .ref_amax = b->dw2_ref.amax};
    p->out.n = n;
    return 0;
}
