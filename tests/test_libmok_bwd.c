/* test_libmok_bwd: libmok's training pass (include/libmok.h: desc.train, mok_workspace_grad_input, mok_backward*)
 * driven from a plain C program, as test_libmok drives the forward: MPI only to start the ranks and share the NCCL
 * id; then a train workspace per tuning variant (comm SMs, raster, chunk rows, input slots, routing skew, token
 * counts), random tokens, routing, weights and dy, mok_route + mok_forward, dy into the grad input slot, and
 *   - y, dx, d_router and the fp32 weight gradients (accumulated onto non-zero start values) against a host
 *     reference with the layer's bf16 roundings (tests/libmok_bwd_ref.c);
 *   - a second and a third backward on the same saved forward with bf16 weight gradients (written), one through
 *     mok_backward_kernel + mok_backward_sum and one through mok_backward after a comm-only backward (kernel and
 *     sum) and a compute-only backward kernel:
 *     dx, d_router, dW13 and dW2 bitwise equal between them (dx and d_router also equal to the fp32 run's), the
 *     bf16 gradients against the reference, experts without rows exactly zero (bf16) or untouched (fp32);
 *   - a forward after the backwards: y bitwise equal to the first forward's;
 *   - calls out of order (MOK_ERR_ORDER) and bad arguments (MOK_ERR_ARGUMENT: shared_sms or shared_units without
 *     shared experts among them, wgrad_reduce not a flag or without train), and the workspace's size with and
 *     without train; two variants add the fp32 gradients by TMA reduce (wgrad_reduce).
 * Ranks hold different token counts, and every variant's token count is below max_tokens on rank 0 too except
 * one, so one rank (the usual run) is ragged as well.
 *
 * Exit 0 pass, 1 fail, 77 skip (no GPU, not sm_90, not one NVLink domain). */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmok.h"
#include "libmok_bwd_ref.h"
#include "libmok_test.h"

#define TOL_Y 1e-2    /* y: as test_libmok */
#define TOL_GRAD 2e-2 /* dx, d_router and the weight gradients, of max |ref| */

struct test {
    int rank, nranks, EL, fails;
    cudaStream_t st;
    uint16_t *w13, *w2;           /* host, every expert (each rank's reference needs them all) */
    uint16_t *d_w13, *d_w2;       /* this rank's experts */
    int32_t *d_ids;               /* device buffers for T_MAX tokens */
    float *d_w, *d_dr;
    uint16_t *d_y, *d_dx;
    float *d_dw13f, *d_dw2f;      /* this rank's experts' gradients, fp32 and bf16 */
    uint16_t *d_dw13b, *d_dw2b;
};

/* A check's line: "ok ..." on rank 0, or the failure on stderr from the rank that saw it (counted). */
static void report(struct test *t, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(struct test *t, int ok, const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!ok) {
        t->fails++;
        fprintf(stderr, "rank %d: FAIL %s\n", t->rank, line);
    } else if (t->rank == 0) {
        printf("ok   %s\n", line);
    }
}

/* A call that must succeed for the variant to go on. */
#define CALL(expr, what)                                                                                         \
    do {                                                                                                         \
        int rc_ = (expr);                                                                                        \
        if (rc_ != MOK_OK) {                                                                                     \
            report(t, 0, "%s%s: %s: %s", tag, what, mok_status_string(rc_), err);                                \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)

/* A call that must fail with `code` (and enqueue nothing). */
#define EXPECT_RC(expr, code, what)                                                                              \
    do {                                                                                                         \
        err[0] = 0;                                                                                              \
        int rc_ = (expr);                                                                                        \
        report(t, rc_ == (code), "%s%s -> %s (%s)", tag, what, mok_status_string(rc_), err);                     \
    } while (0)

/* max |got - ref| and max |ref| over n values; NaN counts as an infinite error. */
struct err {
    double max_err, max_ref;
};
static void err_add(struct err *e, double got, double ref)
{
    e->max_ref = fmax(e->max_ref, fabs(ref));
    e->max_err = isnan(got) ? INFINITY : fmax(e->max_err, fabs(got - ref));
}
static int err_ok(const struct err *e, double tol) { return e->max_err <= tol * e->max_ref; }
static double err_rel(const struct err *e) { return e->max_ref > 0 ? e->max_err / e->max_ref : e->max_err; }

/* A bf16 output against its fp32 reference. */
static struct err compare_bf16(const uint16_t *got, const float *ref, size_t n)
{
    struct err e = {0, 0};
    for (size_t i = 0; i < n; i++)
        err_add(&e, bf16_to_f32(got[i]), ref[i]);
    return e;
}

/* One whole forward, y NaN-poisoned first, into the host buffer out. */
static int forward(const struct test *t, const struct problem *P, int slot, mok_workspace *ws,
                   const struct mok_weights *wt, uint16_t *out, char *err, int err_len)
{
    size_t bytes = sizeof(uint16_t) * (size_t)P->T * H;
    cudaMemsetAsync(t->d_y, 0xFF, bytes, t->st);
    int rc = mok_route(ws, slot, P->T, t->d_ids, t->d_w, t->st, err, err_len);
    if (!rc)
        rc = mok_forward(ws, wt, t->d_y, t->st, err, err_len);
    if (!rc)
        rc = mok_workspace_check(ws, t->st, err, err_len);
    if (!rc && cudaMemcpy(out, t->d_y, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        rc = MOK_ERR_CUDA;
    return rc;
}

/* What one backward left: dx, d_router and the weight gradients (of the kind it wrote). */
struct bwd_out {
    uint16_t *dx, *dw13b, *dw2b;
    float *dr, *dw13f, *dw2f;
};

static int alloc_out(struct bwd_out *o, int EL)
{
    o->dx = malloc(sizeof(uint16_t) * T_MAX * H);
    o->dr = malloc(sizeof(float) * T_MAX * K);
    o->dw13b = malloc(sizeof(uint16_t) * EL * 2 * I * H);
    o->dw2b = malloc(sizeof(uint16_t) * EL * H * I);
    o->dw13f = malloc(sizeof(float) * EL * 2 * I * H);
    o->dw2f = malloc(sizeof(float) * EL * H * I);
    return !o->dx || !o->dr || !o->dw13b || !o->dw2b || !o->dw13f || !o->dw2f;
}
static void free_out(struct bwd_out *o)
{
    free(o->dx), free(o->dr), free(o->dw13b), free(o->dw2b), free(o->dw13f), free(o->dw2f);
}

/* The outputs to the host after the stream's work (mok_workspace_check synchronized it). */
static int download(const struct test *t, int T, int f32, struct bwd_out *o)
{
    size_t n13 = (size_t)t->EL * 2 * I * H, n2 = (size_t)t->EL * H * I;
    cudaError_t e = cudaMemcpy(o->dx, t->d_dx, sizeof(uint16_t) * (size_t)T * H, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(o->dr, t->d_dr, sizeof(float) * (size_t)T * K, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && f32)
        e = cudaMemcpy(o->dw13f, t->d_dw13f, sizeof(float) * n13, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && f32)
        e = cudaMemcpy(o->dw2f, t->d_dw2f, sizeof(float) * n2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && !f32)
        e = cudaMemcpy(o->dw13b, t->d_dw13b, sizeof(uint16_t) * n13, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && !f32)
        e = cudaMemcpy(o->dw2b, t->d_dw2b, sizeof(uint16_t) * n2, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? MOK_OK : MOK_ERR_CUDA;
}

/* The outputs poisoned before a backward, with a byte pattern that differs between the runs compared bitwise
 * (0xFF: NaN; 0x7F: a large finite value), so that a value left unwritten fails the comparison. */
static void poison(const struct test *t, int T, int bf16_grads, int byte)
{
    cudaMemsetAsync(t->d_dx, byte, sizeof(uint16_t) * (size_t)T * H, t->st);
    cudaMemsetAsync(t->d_dr, byte, sizeof(float) * (size_t)T * K, t->st);
    if (bf16_grads) {
        cudaMemsetAsync(t->d_dw13b, byte, sizeof(uint16_t) * (size_t)t->EL * 2 * I * H, t->st);
        cudaMemsetAsync(t->d_dw2b, byte, sizeof(uint16_t) * (size_t)t->EL * H * I, t->st);
    }
}

/* dx and d_router of one backward against the reference. */
static void check_dx_dr(struct test *t, const char *tag, const char *run, const struct problem *P,
                        const struct bwd_out *o)
{
    struct err ex = compare_bf16(o->dx, P->dx, (size_t)P->T * H), er = {0, 0};
    for (size_t i = 0; i < (size_t)P->T * K; i++)
        err_add(&er, o->dr[i], P->dr[i]);
    report(t, err_ok(&ex, TOL_GRAD), "%s%s dx: max err %.2e of max|ref| %.2e (%.2e)", tag, run, ex.max_err,
           ex.max_ref, err_rel(&ex));
    report(t, err_ok(&er, TOL_GRAD), "%s%s d_router: max err %.2e of max|ref| %.2e (%.2e)", tag, run, er.max_err,
           er.max_ref, err_rel(&er));
}

/* The weight gradients against the reference: fp32 ones as seed + the reference sum, bf16 ones as the sum; the
 * experts no route reached exactly seed (fp32: nothing added) or zero (bf16: the step's gradient is zero). */
static void check_wgrads(struct test *t, const char *tag, const char *run, const struct problem *P,
                         const struct bwd_out *o, const float *seed13, const float *seed2, int f32)
{
    const size_t per13 = (size_t)2 * I * H, per2 = (size_t)H * I;
    struct err e13 = {0, 0}, e2 = {0, 0};
    int empty = 0, empty_ok = 1;
    for (int el = 0; el < t->EL; el++) {
        for (int m = 0; m < 2; m++) {
            size_t n = m ? per2 : per13, base = (size_t)el * n;
            const double *ref = (m ? P->dw2 : P->dw13) + base;
            struct err *e = m ? &e2 : &e13;
            for (size_t i = 0; i < n; i++) {
                double got = f32 ? (double)(m ? o->dw2f : o->dw13f)[base + i]
                                 : (double)bf16_to_f32((m ? o->dw2b : o->dw13b)[base + i]);
                double s = f32 ? (double)(m ? seed2 : seed13)[base + i] : 0.0;
                /* the error of got - seed against the sum (the seed's own fp32 addition is exact enough) */
                err_add(e, isnan(got) ? got : got - s, ref[i]);
                if (!P->rows[el] && got != s)
                    empty_ok = 0;
            }
        }
        empty += !P->rows[el];
    }
    report(t, err_ok(&e13, TOL_GRAD), "%s%s dW13 (%s): max err %.2e of max|ref| %.2e (%.2e)", tag, run,
           f32 ? "fp32 +=" : "bf16", e13.max_err, e13.max_ref, err_rel(&e13));
    report(t, err_ok(&e2, TOL_GRAD), "%s%s dW2 (%s): max err %.2e of max|ref| %.2e (%.2e)", tag, run,
           f32 ? "fp32 +=" : "bf16", e2.max_err, e2.max_ref, err_rel(&e2));
    if (empty)
        report(t, empty_ok, "%s%s: %d local expert(s) without rows: gradients %s", tag, run, empty,
               f32 ? "untouched (the start values)" : "written as zero");
}

/* Bitwise equality of two backwards' outputs (weight gradients: bf16 ones, when asked). */
static void check_same(struct test *t, const char *tag, const char *what, int T, const struct bwd_out *a,
                       const struct bwd_out *b, int grads)
{
    int dx = !memcmp(a->dx, b->dx, sizeof(uint16_t) * (size_t)T * H);
    int dr = !memcmp(a->dr, b->dr, sizeof(float) * (size_t)T * K);
    int g13 = !grads || !memcmp(a->dw13b, b->dw13b, sizeof(uint16_t) * (size_t)t->EL * 2 * I * H);
    int g2 = !grads || !memcmp(a->dw2b, b->dw2b, sizeof(uint16_t) * (size_t)t->EL * H * I);
    report(t, dx && dr && g13 && g2, "%s%s: bitwise equal (dx %s, d_router %s%s%s%s%s)", tag, what,
           dx ? "same" : "DIFFERS", dr ? "same" : "DIFFERS", grads ? ", dW13 " : "",
           grads ? (g13 ? "same" : "DIFFERS") : "", grads ? ", dW2 " : "", grads ? (g2 ? "same" : "DIFFERS") : "");
}

/* Before any forward: the backward's calls fail with MOK_ERR_ORDER and enqueue nothing. */
static void check_order_fresh(struct test *t, const char *tag, mok_workspace *ws, const struct mok_weights *wt,
                              const struct mok_grads *gf)
{
    char err[512];
    EXPECT_RC(mok_backward_kernel(ws, wt, gf, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_backward_kernel before any forward");
    EXPECT_RC(mok_backward_kernel(ws, wt, gf, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err), MOK_ERR_ORDER,
              "compute-only mok_backward_kernel before any forward");
    EXPECT_RC(mok_backward_sum(ws, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_backward_sum before any forward");
    EXPECT_RC(mok_backward(ws, wt, gf, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_backward before any forward");
}

/* After a train forward, before its backward: argument errors and calls out of order, none enqueuing anything. */
static void check_before_backward(struct test *t, const char *tag, mok_workspace *ws, const struct mok_weights *wt,
                                  const struct mok_grads *gf)
{
    char err[512];
    struct mok_grads one = {.dw13_f32 = t->d_dw13f};
    struct mok_grads three = {.dw13_f32 = t->d_dw13f, .dw2_f32 = t->d_dw2f, .dw13_bf16 = t->d_dw13b};
    struct mok_grads mixed = {.dw13_f32 = t->d_dw13f, .dw2_bf16 = t->d_dw2b};
    EXPECT_RC(mok_backward_sum(ws, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_backward_sum without a backward kernel");
    EXPECT_RC(mok_backward_kernel(ws, wt, gf, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err), MOK_ERR_ORDER,
              "compute-only mok_backward_kernel before a full backward");
    EXPECT_RC(mok_backward_kernel(ws, wt, &one, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "grads with 1 pointer");
    EXPECT_RC(mok_backward_kernel(ws, wt, &three, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "grads with 3 pointers");
    EXPECT_RC(mok_backward_kernel(ws, wt, &mixed, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "grads dw13_f32 with dw2_bf16");
    EXPECT_RC(mok_backward(ws, wt, &three, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "mok_backward with grads of 3 pointers");
    EXPECT_RC(mok_backward_kernel(ws, wt, gf, (enum mok_variant)3, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "mok_backward_kernel variant 3");
}

static void *upload(const void *host, size_t bytes)
{
    void *d = NULL;
    cudaMalloc(&d, bytes);
    cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}

static int run_variant(struct test *t, const struct variant *v, int vi, mok_workspace *ws, size_t bytes_no_train)
{
    char err[512] = "", tag[16];
    snprintf(tag, sizeof tag, "v%d ", vi);
    const int EL = t->EL;
    const size_t n13 = (size_t)EL * 2 * I * H, n2 = (size_t)EL * H * I;
    struct problem P;
    struct bwd_out f = {0}, a = {0}, b = {0};
    uint16_t *y = malloc(sizeof(uint16_t) * T_MAX * H), *y2 = malloc(sizeof(uint16_t) * T_MAX * H);
    float *seed13 = malloc(sizeof(float) * n13), *seed2 = malloc(sizeof(float) * n2);
    const struct bwd_ref_ctx ref = {t->rank, t->nranks, t->EL, t->w13, t->w2};
    if (make_problem(&ref, v, vi, &P) || alloc_out(&f, EL) || alloc_out(&a, EL) || alloc_out(&b, EL) || !y || !y2 ||
        !seed13 || !seed2) {
        report(t, 0, "%sout of host memory", tag);
        return 1;
    }
    const int T = P.T;
    struct mok_weights wt = {.w13 = t->d_w13, .w2 = t->d_w2};
    struct mok_grads gf = {.dw13_f32 = t->d_dw13f, .dw2_f32 = t->d_dw2f};
    struct mok_grads gb = {.dw13_bf16 = t->d_dw13b, .dw2_bf16 = t->d_dw2b};
    if (vi == 0)
        report(t, mok_workspace_bytes(ws) > bytes_no_train, "%smok_workspace_bytes: %zu with train, %zu without", tag,
               mok_workspace_bytes(ws), bytes_no_train);
    uint16_t *gin = mok_workspace_grad_input(ws, v->slot);
    report(t, gin && gin != mok_workspace_input(ws, v->slot) && !mok_workspace_grad_input(ws, v->input_slots) &&
                  !mok_workspace_grad_input(ws, -1),
           "%smok_workspace_grad_input: slot %d a buffer of its own, slots -1 and %d NULL", tag, v->slot,
           v->input_slots);
    if (!gin)
        return 1;
    check_order_fresh(t, tag, ws, &wt, &gf);

    /* the forward: x in the routed slot, the other slots' x and dy a constant that would show if read */
    for (int s = 0; s < v->input_slots; s++)
        if (s != v->slot) {
            cudaMemset(mok_workspace_input(ws, s), 0x3F, sizeof(uint16_t) * T_MAX * H);
            cudaMemset(mok_workspace_grad_input(ws, s), 0x3F, sizeof(uint16_t) * T_MAX * H);
        }
    cudaMemcpy(mok_workspace_input(ws, v->slot), P.x, sizeof(uint16_t) * (size_t)T * H, cudaMemcpyHostToDevice);
    cudaMemcpy(t->d_ids, P.ids, sizeof(int32_t) * (size_t)T * K, cudaMemcpyHostToDevice);
    cudaMemcpy(t->d_w, P.w, sizeof(float) * (size_t)T * K, cudaMemcpyHostToDevice);
    CALL(forward(t, &P, v->slot, ws, &wt, y, err, sizeof err), "forward");
    struct err ey = compare_bf16(y, P.y, (size_t)T * H);
    report(t, err_ok(&ey, TOL_Y), "%s%d tokens: y max err %.2e of max|ref| %.2e (%.2e)", tag, T, ey.max_err,
           ey.max_ref, err_rel(&ey));
    check_before_backward(t, tag, ws, &wt, &gf);

    /* backward 1: fp32 gradients accumulated onto start values of the gradients' size */
    cudaMemcpy(gin, P.dy, sizeof(uint16_t) * (size_t)T * H, cudaMemcpyHostToDevice);
    {
        double m13 = 0, m2 = 0;
        for (size_t i = 0; i < n13; i++)
            m13 = fmax(m13, fabs(P.dw13[i]));
        for (size_t i = 0; i < n2; i++)
            m2 = fmax(m2, fabs(P.dw2[i]));
        uint32_t s = 4242u + 17u * (uint32_t)t->rank + 101u * (uint32_t)vi;
        for (size_t i = 0; i < n13; i++)
            seed13[i] = uniform(&s) * (float)(m13 > 0 ? m13 : 1.0);
        for (size_t i = 0; i < n2; i++)
            seed2[i] = uniform(&s) * (float)(m2 > 0 ? m2 : 1.0);
    }
    cudaMemcpy(t->d_dw13f, seed13, sizeof(float) * n13, cudaMemcpyHostToDevice);
    cudaMemcpy(t->d_dw2f, seed2, sizeof(float) * n2, cudaMemcpyHostToDevice);
    poison(t, T, 0, 0xFF);
    CALL(mok_backward(ws, &wt, &gf, t->d_dx, t->d_dr, t->st, err, sizeof err), "mok_backward (fp32 gradients)");
    CALL(mok_workspace_check(ws, t->st, err, sizeof err), "after the fp32 backward");
    CALL(download(t, T, 1, &f), "download");
    check_dx_dr(t, tag, "fp32 run:", &P, &f);
    check_wgrads(t, tag, "fp32 run:", &P, &f, seed13, seed2, 1);

    /* backward 2 on the same saved forward: bf16 gradients, kernel and sum apart, with calls out of order between
     * them (each refused, enqueuing nothing) */
    poison(t, T, 1, 0xFF);
    CALL(mok_backward_kernel(ws, &wt, &gb, MOK_VARIANT_FULL, t->st, err, sizeof err), "mok_backward_kernel (bf16)");
    EXPECT_RC(mok_route(ws, v->slot, T, t->d_ids, t->d_w, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_route between the backward kernel and its sum");
    EXPECT_RC(mok_forward_kernel(ws, &wt, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_forward_kernel between the backward kernel and its sum");
    EXPECT_RC(mok_backward_kernel(ws, &wt, &gb, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ORDER,
              "a second mok_backward_kernel before the sum");
    EXPECT_RC(mok_backward_kernel(ws, &wt, &gb, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err), MOK_ERR_ORDER,
              "compute-only mok_backward_kernel before the sum");
    CALL(mok_backward_sum(ws, t->d_dx, t->d_dr, t->st, err, sizeof err), "mok_backward_sum (bf16)");
    CALL(mok_workspace_check(ws, t->st, err, sizeof err), "after the bf16 backward");
    CALL(download(t, T, 0, &a), "download");
    check_dx_dr(t, tag, "bf16 run:", &P, &a);
    check_wgrads(t, tag, "bf16 run:", &P, &a, NULL, NULL, 0);
    check_same(t, tag, "dx, d_router with fp32 and with bf16 gradients", T, &f, &a, 0);

    /* the breakdown's comm-only backward (kernel and sum: dy dispatched, dx and d_router sent, nothing computed;
     * its outputs meaningless) and compute-only kernel (no sum after it), then backward 3 through mok_backward */
    CALL(mok_backward_kernel(ws, &wt, &gb, MOK_VARIANT_COMM_ONLY, t->st, err, sizeof err),
         "comm-only mok_backward_kernel");
    EXPECT_RC(mok_route(ws, v->slot, T, t->d_ids, t->d_w, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_route between a comm-only backward kernel and its sum");
    CALL(mok_backward_sum(ws, t->d_dx, t->d_dr, t->st, err, sizeof err), "mok_backward_sum after comm-only");
    CALL(mok_workspace_check(ws, t->st, err, sizeof err), "after the comm-only backward");
    CALL(mok_backward_kernel(ws, &wt, &gb, MOK_VARIANT_COMPUTE_ONLY, t->st, err, sizeof err),
         "compute-only mok_backward_kernel");
    EXPECT_RC(mok_backward_sum(ws, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ORDER,
              "mok_backward_sum after a compute-only kernel");
    CALL(mok_workspace_check(ws, t->st, err, sizeof err), "after the compute-only backward kernel");
    poison(t, T, 1, 0x7F);
    CALL(mok_backward(ws, &wt, &gb, t->d_dx, t->d_dr, t->st, err, sizeof err), "mok_backward (bf16, again)");
    CALL(mok_workspace_check(ws, t->st, err, sizeof err), "after the second bf16 backward");
    CALL(download(t, T, 0, &b), "download");
    check_same(t, tag, "two bf16 backwards, a comm-only backward and a compute-only kernel between them", T, &a, &b,
               1);

    /* a forward after the backwards gives the first forward's y */
    CALL(forward(t, &P, v->slot, ws, &wt, y2, err, sizeof err), "forward after the backwards");
    report(t, !memcmp(y, y2, sizeof(uint16_t) * (size_t)T * H), "%sforward after the backwards: y bitwise equal",
           tag);

    free_problem(&P);
    free_out(&f), free_out(&a), free_out(&b);
    free(y), free(y2), free(seed13), free(seed2);
    return 0;
}

/* A description mok_workspace_create refuses with MOK_ERR_ARGUMENT, naming `field`, creating nothing. */
static void expect_refused(struct test *t, ncclComm_t comm, const struct mok_layer_desc *d, const char *what,
                           const char *field)
{
    char err[512] = "";
    const char *tag = "";
    mok_workspace *ws = NULL;
    EXPECT_RC(mok_workspace_create(comm, d, t->st, &ws, err, sizeof err), MOK_ERR_ARGUMENT, what);
    report(t, !ws && strstr(err, field), "the refusal names %s, no workspace: %s", field, err);
    mok_workspace_destroy(ws);
}

/* Descriptions refused or limited by train, on workspaces of their own: train with intermediate 128 is refused
 * (nothing created), a train = 0 workspace has no backward and no grad input slots. Returns the train = 0
 * workspace's bytes (0 if it could not be created). */
static size_t check_train_fields(struct test *t, ncclComm_t comm, const struct mok_layer_desc *train_desc)
{
    char err[512] = "";
    const char *tag = "";
    struct mok_layer_desc d = *train_desc;
    d.intermediate = 128;
    expect_refused(t, comm, &d, "mok_workspace_create with train = 1 and intermediate 128", "intermediate");
    d = *train_desc;
    d.shared_sms = 8; /* the shared experts' SMs: this layer has none */
    expect_refused(t, comm, &d, "mok_workspace_create with shared_sms 8 and no shared experts", "shared_sms");
    d = *train_desc;
    d.shared_units = 1; /* the shared experts' backward inside the kernel: this layer has none */
    expect_refused(t, comm, &d, "mok_workspace_create with shared_units 1 and no shared experts", "shared_units");
    d = *train_desc;
    d.wgrad_reduce = 2; /* a flag */
    expect_refused(t, comm, &d, "mok_workspace_create with wgrad_reduce 2", "wgrad_reduce");
    d = *train_desc;
    d.train = 0, d.wgrad_reduce = 1; /* no backward: no gradients to add */
    expect_refused(t, comm, &d, "mok_workspace_create with wgrad_reduce 1 and train 0", "wgrad_reduce");
    mok_workspace *ws = NULL;
    d = *train_desc;
    d.train = 0;
    int rc = mok_workspace_create(comm, &d, t->st, &ws, err, sizeof err);
    report(t, rc == MOK_OK, "mok_workspace_create with train = 0: %s %s", mok_status_string(rc), err);
    if (rc)
        return 0;
    struct mok_weights wt = {.w13 = t->d_w13, .w2 = t->d_w2};
    struct mok_grads gf = {.dw13_f32 = t->d_dw13f, .dw2_f32 = t->d_dw2f};
    EXPECT_RC(mok_backward_kernel(ws, &wt, &gf, MOK_VARIANT_FULL, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "mok_backward_kernel on a train = 0 workspace");
    EXPECT_RC(mok_backward(ws, &wt, &gf, t->d_dx, t->d_dr, t->st, err, sizeof err), MOK_ERR_ARGUMENT,
              "mok_backward on a train = 0 workspace");
    report(t, !mok_workspace_grad_input(ws, 0), "mok_workspace_grad_input on a train = 0 workspace: NULL");
    size_t bytes = mok_workspace_bytes(ws);
    mok_workspace_destroy(ws);
    return bytes;
}

int main(int argc, char **argv)
{
    struct test t = {0};
    ncclComm_t comm;
    int rc0 = libmok_start(&argc, &argv, E, &t.rank, &t.nranks, &comm);
    if (rc0)
        return rc0;
    cudaStreamCreate(&t.st);

    /* tuning: comm SMs 2 and 16, raster 0 and 1, chunk rows 7, 64 and the default, the dy slot of input slot 1 of 2,
     * skewed routing (expert 0 several row blocks), a variant whose rank 0 holds one token (experts without rows:
     * their weight-gradient tiles have no k blocks); rank 0's tokens: 300 (= max_tokens) in one variant only; the fp32
     * gradients added by TMA reduce (wgrad_reduce) in two */
    const struct variant variants[] = {
        {2, 0, 7, 1, 0, T_MAX, 123, 0, 0},
        {16, 1, 0, 2, 1, 123, T_MAX, 1, 1},
        {16, 0, 7, 1, 0, 1, 57, 0, 1},
        {2, 1, 64, 2, 1, 200, 255, 1, 0},
    };
    const int nvar = (int)(sizeof variants / sizeof variants[0]);
    struct mok_layer_desc descs[sizeof variants / sizeof variants[0]];
    for (int v = 0; v < nvar; v++)
        descs[v] = (struct mok_layer_desc){.hidden = H, .intermediate = I, .experts = E, .topk = K,
                                           .max_tokens = T_MAX, .capacity_factor = 4.0,
                                           .input_slots = variants[v].input_slots, .comm_sms = variants[v].comm_sms,
                                           .chunk_rows = variants[v].chunk_rows, .dispatch_push = 1,
                                           .combine_per_rank = 0, .send_from_gemm = 1,
                                           .raster = variants[v].raster, .train = 1,
                                           .wgrad_reduce = variants[v].wgrad_reduce};
    /* not one NVLink domain: skip, as the forward's test does (every rank reaches the same answer) */
    char err[512] = "";
    int rc = mok_layer_check(comm, &descs[0], err, sizeof err);
    int skip = rc == MOK_ERR_UNSUPPORTED && strstr(err, "NVLink"), any_skip = 0;
    MPI_Allreduce(&skip, &any_skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_skip) {
        if (t.rank == 0)
            printf("SKIP: libmok needs every rank in one NVLink domain (%s)\n", skip ? err : "another rank said so");
        ncclCommDestroy(comm);
        MPI_Finalize();
        return 77;
    }

    t.EL = E / t.nranks;
    t.w13 = malloc(sizeof(uint16_t) * E * 2 * I * H);
    t.w2 = malloc(sizeof(uint16_t) * E * H * I);
    make_weights(t.w13, t.w2);
    const size_t n13 = (size_t)t.EL * 2 * I * H, n2 = (size_t)t.EL * H * I;
    t.d_w13 = upload(t.w13 + (size_t)t.rank * n13, sizeof(uint16_t) * n13);
    t.d_w2 = upload(t.w2 + (size_t)t.rank * n2, sizeof(uint16_t) * n2);
    cudaMalloc((void **)&t.d_ids, sizeof(int32_t) * T_MAX * K);
    cudaMalloc((void **)&t.d_w, sizeof(float) * T_MAX * K);
    cudaMalloc((void **)&t.d_dr, sizeof(float) * T_MAX * K);
    cudaMalloc((void **)&t.d_y, sizeof(uint16_t) * T_MAX * H);
    cudaMalloc((void **)&t.d_dx, sizeof(uint16_t) * T_MAX * H);
    cudaMalloc((void **)&t.d_dw13f, sizeof(float) * n13);
    cudaMalloc((void **)&t.d_dw2f, sizeof(float) * n2);
    cudaMalloc((void **)&t.d_dw13b, sizeof(uint16_t) * n13);
    cudaMalloc((void **)&t.d_dw2b, sizeof(uint16_t) * n2);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "rank %d: device buffers: %s\n", t.rank, cudaGetErrorString(cudaGetLastError()));
        return 1;
    }

    size_t bytes_no_train = check_train_fields(&t, comm, &descs[0]);
    for (int v = 0; v < nvar; v++) {
        mok_workspace *ws = NULL;
        rc = mok_workspace_create(comm, &descs[v], t.st, &ws, err, sizeof err);
        if (rc) {
            fprintf(stderr, "rank %d: create (variant %d): %s: %s\n", t.rank, v, mok_status_string(rc), err);
            t.fails++;
            break; /* the other ranks may be waiting in a collective: stop here */
        }
        if (t.rank == 0)
            printf("variant %d: comm_sms %d, raster %d, chunk_rows %d, slot %d of %d, tokens %d (rank 0) / %d.. "
                   "(others), %s routing, wgrad_reduce %d, %d rank(s)\n",
                   v, variants[v].comm_sms, variants[v].raster, variants[v].chunk_rows, variants[v].slot,
                   variants[v].input_slots, variants[v].t0, variants[v].t1, variants[v].hot ? "skewed" : "uniform",
                   variants[v].wgrad_reduce, t.nranks);
        if (run_variant(&t, &variants[v], v, ws, bytes_no_train))
            fprintf(stderr, "rank %d: variant %d stopped (above)\n", t.rank, v);
        mok_workspace_destroy(ws);
    }
    int total = 0;
    MPI_Allreduce(&t.fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t.rank == 0)
        printf("test_libmok_bwd: %s (%d failures over %d ranks)\n", total ? "FAIL" : "PASS", total, t.nranks);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return total ? 1 : 0;
}
