/* test_libmok: include/libmok.h driven from a plain C program, as a framework would: MPI only to start the ranks
 * and share the NCCL id; then a workspace per tuning variant (comm SMs, combine, dispatch, raster, shared experts),
 * random tokens, routing and weights, mok_route + mok_forward, and y checked against a host fp32 reference with the
 * layer's bf16 roundings (GEMM outputs and the SwiGLU output rounded to bf16, fp32 accumulation, the weighted top-k
 * sum in fp32, the shared experts' bf16 output added last). A second forward on the same inputs must give bitwise
 * the same y, and so must a forward after the breakdown's partial variants (compute only, comm only). Calls out of
 * order and bad fields must fail with their codes. Ranks hold different token counts. Exit 0 pass, 1 fail, 77 skip
 * (no GPU, not sm_90, not one NVLink domain). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmok.h"
#include "libmok_test.h"

#define H 256
#define I 128
#define E 8
#define K 2
#define SI 128 /* the shared experts' intermediate, where a variant has them */

static void fill_bf16(uint16_t *v, size_t n, float scale, uint32_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = f32_to_bf16(uniform(s) * scale);
}

/* Expert e's weights, the same on every rank (each rank's reference needs every expert), and the shared ones. */
static void make_weights(uint16_t *w13, uint16_t *w2, uint16_t *sw13, uint16_t *sw2)
{
    uint32_t s = 12345;
    fill_bf16(w13, (size_t)E * 2 * I * H, 1.0f / sqrtf((float)H), &s);
    fill_bf16(w2, (size_t)E * H * I, 1.0f / sqrtf((float)I), &s);
    fill_bf16(sw13, (size_t)2 * SI * H, 1.0f / sqrtf((float)H), &s);
    fill_bf16(sw2, (size_t)H * SI, 1.0f / sqrtf((float)SI), &s);
}

static void make_tokens(int rank, int T, uint16_t *x, int32_t *ids, float *w)
{
    uint32_t s = 777u + 31u * (uint32_t)rank;
    for (size_t i = 0; i < (size_t)T * H; i++)
        x[i] = f32_to_bf16(uniform(&s));
    for (int t = 0; t < T; t++) {
        int a = (int)(lcg(&s) % E), b = (int)(lcg(&s) % (E - 1));
        ids[t * K] = a;
        ids[t * K + 1] = b >= a ? b + 1 : b; /* distinct */
        float u = uniform(&s), z = 1.0f + expf(u);
        w[t * K] = expf(u) / z;
        w[t * K + 1] = 1.0f / z;
    }
}

/* One MLP on token row x: out = bf16(bf16(silu(gate) * up) . w2), gate and up rounded to bf16 (inter columns). */
static void mlp(const uint16_t *x, const uint16_t *w13, const uint16_t *w2, int inter, float *out)
{
    float g[2 * (I > SI ? I : SI)], h[I > SI ? I : SI];
    for (int n = 0; n < 2 * inter; n++) {
        float a = 0;
        for (int c = 0; c < H; c++)
            a += bf16_to_f32(x[c]) * bf16_to_f32(w13[(size_t)n * H + c]);
        g[n] = round_bf16(a);
    }
    for (int n = 0; n < inter; n++)
        h[n] = round_bf16(g[n] / (1.0f + expf(-g[n])) * g[inter + n]);
    for (int n = 0; n < H; n++) {
        float a = 0;
        for (int c = 0; c < inter; c++)
            a += h[c] * bf16_to_f32(w2[(size_t)n * inter + c]);
        out[n] = round_bf16(a);
    }
}

/* y = sum_j w_j expert_j(x) (+ the shared MLP's output when sw13 is given) */
static void reference(int T, const uint16_t *x, const int32_t *ids, const float *w, const uint16_t *w13,
                      const uint16_t *w2, const uint16_t *sw13, const uint16_t *sw2, float *y)
{
    float o[H];
    for (int t = 0; t < T; t++) {
        const uint16_t *xt = x + (size_t)t * H;
        float acc_y[H] = {0};
        for (int j = 0; j < K; j++) {
            int e = ids[t * K + j];
            mlp(xt, w13 + (size_t)e * 2 * I * H, w2 + (size_t)e * H * I, I, o);
            for (int n = 0; n < H; n++)
                acc_y[n] += w[t * K + j] * o[n];
        }
        if (sw13) {
            mlp(xt, sw13, sw2, SI, o);
            for (int n = 0; n < H; n++)
                acc_y[n] += o[n];
        }
        for (int n = 0; n < H; n++)
            y[(size_t)t * H + n] = acc_y[n];
    }
}

/* One rank's problem: host inputs and both references, and the device copies libmok reads. */
struct test {
    int rank, nranks, T, T_MAX, EL;
    cudaStream_t st;
    uint16_t *x, *y, *y2;
    float *ref, *ref_shared; /* without and with the shared experts */
    uint16_t *d_w13, *d_w2, *d_sw13, *d_sw2, *d_y;
    int32_t *d_ids;
    float *d_w;
};

static void *upload(const void *host, size_t bytes)
{
    void *d = NULL;
    cudaMalloc(&d, bytes);
    cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}

static void make_test(struct test *t)
{
    /* ragged: every rank but the first holds fewer tokens than max_tokens */
    t->T_MAX = 300, t->T = t->rank == 0 ? t->T_MAX : 123, t->EL = E / t->nranks;
    int T = t->T, EL = t->EL;
    uint16_t *w13 = malloc(sizeof(uint16_t) * E * 2 * I * H), *w2 = malloc(sizeof(uint16_t) * E * H * I);
    uint16_t *sw13 = malloc(sizeof(uint16_t) * 2 * SI * H), *sw2 = malloc(sizeof(uint16_t) * H * SI);
    int32_t *ids = malloc(sizeof(int32_t) * T * K);
    float *w = malloc(sizeof(float) * T * K);
    t->x = malloc(sizeof(uint16_t) * T * H), t->y = malloc(sizeof(uint16_t) * T * H);
    t->y2 = malloc(sizeof(uint16_t) * T * H);
    t->ref = malloc(sizeof(float) * T * H), t->ref_shared = malloc(sizeof(float) * T * H);
    make_weights(w13, w2, sw13, sw2);
    make_tokens(t->rank, T, t->x, ids, w);
    reference(T, t->x, ids, w, w13, w2, NULL, NULL, t->ref);
    reference(T, t->x, ids, w, w13, w2, sw13, sw2, t->ref_shared);
    t->d_w13 = upload(w13 + (size_t)t->rank * EL * 2 * I * H, sizeof(uint16_t) * EL * 2 * I * H);
    t->d_w2 = upload(w2 + (size_t)t->rank * EL * H * I, sizeof(uint16_t) * EL * H * I);
    t->d_sw13 = upload(sw13, sizeof(uint16_t) * 2 * SI * H);
    t->d_sw2 = upload(sw2, sizeof(uint16_t) * H * SI);
    t->d_ids = upload(ids, sizeof(int32_t) * T * K);
    t->d_w = upload(w, sizeof(float) * T * K);
    cudaMalloc((void **)&t->d_y, sizeof(uint16_t) * T * H);
    free(w13), free(w2), free(sw13), free(sw2), free(ids), free(w);
}

/* One whole forward into the host buffer out, NaN-poisoned first. */
static int forward(const struct test *t, mok_workspace *ws, const struct mok_weights *wt, uint16_t *out, char *err,
                   int err_len)
{
    size_t bytes = sizeof(uint16_t) * (size_t)t->T * H;
    cudaMemsetAsync(t->d_y, 0xFF, bytes, t->st);
    int rc = mok_route(ws, 0, t->T, t->d_ids, t->d_w, t->st, err, err_len);
    if (!rc)
        rc = mok_forward(ws, wt, t->d_y, t->st, err, err_len);
    if (!rc)
        rc = mok_workspace_check(ws, t->st, err, err_len);
    if (!rc && cudaMemcpy(out, t->d_y, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        rc = MOK_ERR_CUDA;
    return rc;
}

/* Before any forward: each call out of order fails with MOK_ERR_ORDER and enqueues nothing; mok_workspace_store_h's
 * arguments. */
static int check_order(const struct test *t, mok_workspace *ws, const struct mok_weights *wt)
{
    char err[512];
    int rc = mok_forward_sum(ws, t->d_y, t->st, err, sizeof err);
    CK(rc == MOK_ERR_ORDER, "sum before route: %s (%s)", mok_status_string(rc), err);
    rc = mok_forward_kernel(ws, wt, MOK_VARIANT_FULL, t->st, err, sizeof err);
    CK(rc == MOK_ERR_ORDER, "kernel before route: %s (%s)", mok_status_string(rc), err);
    rc = mok_forward_kernel(ws, wt, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err);
    CK(rc == MOK_ERR_ORDER, "compute_only before any forward: %s (%s)", mok_status_string(rc), err);
    /* and bf16 keeps h (GEMM2 reads it): mok_workspace_store_h takes only 1 */
    rc = mok_workspace_store_h(ws, 0, t->st, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "on = 0"), "store_h 0 on bf16: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_store_h(ws, 2, t->st, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "on = 2"), "store_h 2: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_store_h(ws, 1, t->st, err, sizeof err);
    CK(rc == MOK_OK, "store_h 1 on bf16: %s (%s)", mok_status_string(rc), err);
    return 0;
}

/* The breakdown's partial variants run (compute alone; route + comm alone + sum), and a full forward after
 * them gives the same y as before. */
static int check_partial_variants(const struct test *t, mok_workspace *ws, const struct mok_weights *wt)
{
    char err[512];
    int rc = mok_forward_kernel(ws, wt, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err);
    if (!rc)
        rc = mok_route(ws, 0, t->T, t->d_ids, t->d_w, t->st, err, sizeof err);
    if (!rc)
        rc = mok_forward_kernel(ws, wt, MOK_VARIANT_COMM_ONLY, t->st, err, sizeof err);
    if (!rc)
        rc = mok_forward_sum(ws, t->d_y, t->st, err, sizeof err);
    if (!rc)
        rc = mok_workspace_check(ws, t->st, err, sizeof err);
    CK(rc == MOK_OK, "partial variants: %s: %s", mok_status_string(rc), err);
    rc = forward(t, ws, wt, t->y2, err, sizeof err);
    CK(rc == MOK_OK, "forward after the partial variants: %s: %s", mok_status_string(rc), err);
    CK(!memcmp(t->y, t->y2, sizeof(uint16_t) * (size_t)t->T * H), "the forward after the partial variants differs");
    return 0;
}

/* y of the first forward against the reference, the second bitwise equal to it. */
static int check_output(const struct test *t, const float *ref, double *rel)
{
    double maxref = 0, maxerr = 0;
    for (size_t i = 0; i < (size_t)t->T * H; i++) {
        maxref = fmax(maxref, fabs(ref[i]));
        float got = bf16_to_f32(t->y[i]);
        maxerr = isnan(got) ? INFINITY : fmax(maxerr, fabs(got - ref[i]));
    }
    *rel = maxerr / maxref;
    CK(maxerr <= 1e-2 * maxref, "max error %.3e of max|ref| %.3e", maxerr, maxref);
    CK(!memcmp(t->y, t->y2, sizeof(uint16_t) * (size_t)t->T * H), "two forwards differ");
    return 0;
}

struct variant {
    int comm_sms, per_rank, push, raster, shared, combine_sms, send, lockstep, own_first, gather;
};

static int run_variant(const struct test *t, const struct variant *v, mok_workspace *ws)
{
    char err[512];
    struct mok_weights wt = {.w13 = t->d_w13, .w2 = t->d_w2};
    if (v->shared)
        wt.shared_w13 = t->d_sw13, wt.shared_w2 = t->d_sw2;
    if (check_order(t, ws, &wt))
        return 1;
    cudaMemcpy(mok_workspace_input(ws, 0), t->x, sizeof(uint16_t) * (size_t)t->T * H, cudaMemcpyHostToDevice);
    int rc = forward(t, ws, &wt, t->y, err, sizeof err);
    CK(rc == MOK_OK, "first forward: %s: %s", mok_status_string(rc), err);
    rc = forward(t, ws, &wt, t->y2, err, sizeof err);
    CK(rc == MOK_OK, "second forward: %s: %s", mok_status_string(rc), err);
    double rel = 0;
    if (check_output(t, v->shared ? t->ref_shared : t->ref, &rel) || check_partial_variants(t, ws, &wt))
        return 1;
    if (t->rank == 0)
        printf("ok   comm_sms %d (combine %d), per_rank %d, push %d, raster %d, shared %d, send %d, lockstep %d, "
               "own_first %d, gather %d: max err %.2e of max|ref|, bitwise repeatable, also after the partial "
               "variants\n", v->comm_sms, v->combine_sms, v->per_rank, v->push, v->raster, v->shared, v->send,
               v->lockstep, v->own_first, v->gather, rel);
    return 0;
}

/* A bad field is refused by name and value, with no communication (mok_layer_check). */
static int check_bad_fields(const struct test *t, ncclComm_t comm, const struct mok_layer_desc *good)
{
    char err[512];
    struct mok_layer_desc d = *good;
    d.raster = 2;
    int rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "raster = 2"), "raster 2: %s (%s)", mok_status_string(rc), err);
    d = *good;
    d.shared_intermediate = 100;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "shared_intermediate = 100"), "shared_intermediate 100: %s (%s)",
       mok_status_string(rc), err);
    d = *good;
    d.own_first = -1;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "own_first = -1"), "own_first -1: %s (%s)", mok_status_string(rc), err);
    d = *good;
    d.push_all = 1; /* good is bf16: the push there leaves own rows in place */
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "push_all = 1"), "push_all 1 with bf16: %s (%s)", mok_status_string(rc),
       err);
    d = *good;
    d.gather = 2;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "gather = 2"), "gather 2: %s (%s)", mok_status_string(rc), err);
    d = *good;
    d.gather = 1, d.dispatch_push = 0;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "gather = 1"), "gather 1 with pull: %s (%s)", mok_status_string(rc),
       err);
    d.gather = -1; /* resolved to 0 where 1 does not apply */
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_OK, "gather -1 with pull: %s (%s)", mok_status_string(rc), err);
    d = *good;
    d.dtype = 3; /* 2 is MOK_LAYER_MXFP8 */
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "dtype = 3"), "dtype 3: %s (%s)", mok_status_string(rc), err);
    d = *good;
    d.dtype = MOK_LAYER_FP8_BLOCK, d.dispatch_push = 0;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "dispatch_push 1 (0"), "fp8_block with pull: %s (%s)",
       mok_status_string(rc), err);
    d.dispatch_push = 1;
    rc = mok_layer_check(comm, &d, err, sizeof err);
    CK(rc == MOK_OK, "fp8_block with push: %s (%s)", mok_status_string(rc), err);
    rc = mok_layer_check(comm, good, err, sizeof err);
    CK(rc == MOK_OK, "a good description: %s (%s)", mok_status_string(rc), err);
    return 0;
}

int main(int argc, char **argv)
{
    struct test t = {0};
    ncclComm_t comm;
    int rc0 = libmok_start(&argc, &argv, E, &t.rank, &t.nranks, &comm);
    if (rc0)
        return rc0;
    cudaStreamCreate(&t.st);
    make_test(&t);

    const struct variant variants[] = {
        {4, 0, 0, 0, 0, 0, 0, 0, 0, 0},   {4, 1, 0, 1, 0, 1, 0, 0, 0, 0},  {2, 0, 1, 0, 0, 0, 0, 0, 0, 0},
        {2, 1, 1, 1, 0, 1, 0, 0, 0, 0},   {4, 0, 0, 1, SI, 2, 0, 0, 0, 0}, {2, 1, 1, 0, SI, 0, 0, 0, 0, 0},
        {4, 0, 0, 1, 0, 0, 1, 0, 0, 0},   {2, 0, 1, 0, SI, 0, 1, 0, 0, 0}, {2, 0, 1, 1, SI, 0, 1, 1, 1, 0},
        {4, 1, 1, 1, 0, 0, 0, 1, E, 0},   {2, 0, 1, 0, 0, 0, 1, 0, 2, 0},  {2, 0, 1, 1, 0, 0, 1, 0, 0, 1},
        {4, 1, 1, 0, SI, 0, 0, 0, 0, 1},  {2, 0, 1, 1, SI, 0, 1, 0, 0, -1}};
    /* combine_sms < comm_sms: the other comm SMs join the GEMMs after the dispatch; send: GEMM2 sends the rows;
     * lockstep, own_first (push only: the first 1 or 2 local experts' own rows first, or all E / nranks); gather
     * (push: GEMM1 reads the landed rows; -1: mok_layer_gather_auto, 1 at one rank (75 rows per expert), 0 at
     * two) */
    int nvar = (int)(sizeof variants / sizeof variants[0]), failures = 0;
    char err[512];
    for (int v = 0; v < nvar; v++) {
        struct mok_layer_desc d = {.hidden = H, .intermediate = I, .shared_intermediate = variants[v].shared,
                                   .experts = E, .topk = K, .max_tokens = t.T_MAX, .capacity_factor = 4.0,
                                   .input_slots = 1, .comm_sms = variants[v].comm_sms,
                                   .combine_per_rank = variants[v].per_rank, .chunk_rows = 7,
                                   .dispatch_push = variants[v].push, .raster = variants[v].raster,
                                   .combine_sms = variants[v].combine_sms, .send_from_gemm = variants[v].send,
                                   .lockstep = variants[v].lockstep, .own_first = variants[v].own_first,
                                   .gather = variants[v].gather};
        if (v == 0)
            failures += check_bad_fields(&t, comm, &d);
        mok_workspace *ws = NULL;
        int rc = mok_workspace_create(comm, &d, t.st, &ws, err, sizeof err);
        if (rc) {
            fprintf(stderr, "rank %d: create (variant %d): %s: %s\n", t.rank, v, mok_status_string(rc), err);
            failures++;
            break; /* the other ranks may be waiting in a collective: stop here */
        }
        if (run_variant(&t, &variants[v], ws)) {
            fprintf(stderr, "rank %d: variant %d failed (above)\n", t.rank, v);
            failures++;
        }
        mok_workspace_destroy(ws);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t.rank == 0)
        printf("test_libmok: %s (%d failures over %d ranks)\n", total ? "FAILED" : "all passed", total, t.nranks);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return total ? 1 : 0;
}
