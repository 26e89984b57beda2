/* test_libmok_fp8: libmok's fp8_block forward (desc.dtype MOK_LAYER_FP8_BLOCK) driven from a plain C program, against
 * a host reference built on src/fp8.c (the formats' host definition, matched to ml_dtypes; none of libmok's code):
 *   weights   mok_quantize_weights_fp8_block on the device, byte for byte the host quantizer's (and a weight with a
 *             NaN refused);
 *   h         each route's SwiGLU output from mok_workspace_export_h, against GEMM1 in fp32 on the host-quantized
 *             x rows (1 x 128) and weights (128 x 128), rounded to bf16 and SwiGLU'd as the bf16 layer, to 1e-2 of
 *             max |ref|;
 *   y         against GEMM2 in fp32 on the exported h quantized by the host (1 x 128), the expert outputs rounded to
 *             bf16 and summed in fp32 over k in order, to 1e-2 (the layer check's split: a re-quantized h turns
 *             GEMM1's last-bit differences into whole e4m3 steps, src/problem_fp8_layer.c);
 * per tuning variant (send_from_gemm, combine_per_rank, comm_sms, raster), with ragged token counts, y bitwise the
 * same on a second forward, and the calls and weights the dtype does not take refused. Exit 0 pass, 1 fail, 77 skip
 * (no GPU, not sm_90, not one NVLink domain). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "libmok.h"
#include "libmok_test.h"

#define H 256
#define I 256 /* two 128-column blocks of h: both GEMM1 pairs of a row block */
#define E 8
#define K 2

#define CK(cond, ...)                                                                                            \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "rank %d: ", t->rank);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fprintf(stderr, "\n");                                                                               \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)

struct test {
    int rank, nranks, T, T_MAX, EL;
    cudaStream_t st;
    float *x;                 /* [T][H] the bf16 tokens as floats */
    uint16_t *x16;            /* [T][H] */
    int32_t *ids;
    float *w;
    uint8_t *w13q, *w2q;      /* every expert, host-quantized */
    float *w13s, *w2s;
    float *w13d, *w2d;        /* ... and dequantized (the reference's operands) */
    uint16_t *d_w13, *d_w2;   /* this rank's experts, bf16 (device) */
    uint8_t *d_w13q, *d_w2q;  /* ... quantized on the device */
    float *d_w13s, *d_w2s;
    int32_t *d_ids;
    float *d_w;
    uint16_t *d_y, *d_h;
};

static void *upload(const void *host, size_t bytes)
{
    void *d = NULL;
    cudaMalloc(&d, bytes);
    if (host)
        cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    return d;
}

static void make_test(struct test *t)
{
    t->T_MAX = 300, t->T = t->rank == 0 ? t->T_MAX : 123, t->EL = E / t->nranks;
    const int T = t->T, EL = t->EL;
    const size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    uint16_t *w13 = malloc(2 * n13), *w2 = malloc(2 * n2);
    float *f = malloc(sizeof(float) * (n13 > n2 ? n13 : n2));
    uint32_t s = 4242;
    for (size_t i = 0; i < n13; i++)
        w13[i] = f32_to_bf16(uniform(&s) / sqrtf((float)H));
    for (size_t i = 0; i < n2; i++)
        w2[i] = f32_to_bf16(uniform(&s) / sqrtf((float)I));
    t->w13q = malloc(n13), t->w2q = malloc(n2);
    t->w13s = malloc(sizeof(float) * n13 / (128 * 128)), t->w2s = malloc(sizeof(float) * n2 / (128 * 128));
    for (size_t i = 0; i < n13; i++)
        f[i] = bf16_to_f32(w13[i]);
    for (int e = 0; e < E; e++) /* per matrix: the layout struct mok_weights takes */
        mok_quant_fp8_block_weights(f + (size_t)e * 2 * I * H, 2 * I, H, t->w13q + (size_t)e * 2 * I * H,
                                    t->w13s + (size_t)e * (2 * I / 128) * (H / 128));
    for (size_t i = 0; i < n2; i++)
        f[i] = bf16_to_f32(w2[i]);
    for (int e = 0; e < E; e++)
        mok_quant_fp8_block_weights(f + (size_t)e * H * I, H, I, t->w2q + (size_t)e * H * I,
                                    t->w2s + (size_t)e * (H / 128) * (I / 128));
    /* tokens and routing: distinct experts per token, softmax-like weights; ranks hold different token counts */
    uint32_t r = 99u + 17u * (uint32_t)t->rank;
    t->x = malloc(sizeof(float) * T * H), t->x16 = malloc(2 * (size_t)T * H);
    t->ids = malloc(sizeof(int32_t) * T * K), t->w = malloc(sizeof(float) * T * K);
    for (size_t i = 0; i < (size_t)T * H; i++) {
        t->x16[i] = f32_to_bf16(uniform(&r) * 2.0f);
        t->x[i] = bf16_to_f32(t->x16[i]);
    }
    for (int i = 0; i < T; i++) {
        int a = (int)(lcg(&r) % E), b = (int)(lcg(&r) % (E - 1));
        t->ids[i * K] = a, t->ids[i * K + 1] = b >= a ? b + 1 : b;
        float u = uniform(&r), z = 1.0f + expf(u);
        t->w[i * K] = expf(u) / z, t->w[i * K + 1] = 1.0f / z;
    }
    t->w13d = malloc(sizeof(float) * n13), t->w2d = malloc(sizeof(float) * n2);
    for (int e = 0; e < E; e++)
        for (int n = 0; n < 2 * I; n++)
            for (int c = 0; c < H; c++) {
                const size_t i = ((size_t)e * 2 * I + n) * H + c;
                t->w13d[i] = mok_e4m3_to_f32(t->w13q[i]) * t->w13s[((size_t)e * (2 * I / 128) + n / 128) * (H / 128) +
                                                                   c / 128];
            }
    for (int e = 0; e < E; e++)
        for (int n = 0; n < H; n++)
            for (int c = 0; c < I; c++) {
                const size_t i = ((size_t)e * H + n) * I + c;
                t->w2d[i] = mok_e4m3_to_f32(t->w2q[i]) *
                            t->w2s[((size_t)e * (H / 128) + n / 128) * (I / 128) + c / 128];
            }
    const size_t l13 = (size_t)EL * 2 * I * H, l2 = (size_t)EL * H * I;
    t->d_w13 = upload(w13 + (size_t)t->rank * l13, 2 * l13);
    t->d_w2 = upload(w2 + (size_t)t->rank * l2, 2 * l2);
    t->d_w13q = upload(NULL, l13), t->d_w2q = upload(NULL, l2);
    t->d_w13s = upload(NULL, sizeof(float) * l13 / (128 * 128)), t->d_w2s = upload(NULL, sizeof(float) * l2 / 16384);
    t->d_ids = upload(t->ids, sizeof(int32_t) * T * K);
    t->d_w = upload(t->w, sizeof(float) * T * K);
    t->d_y = upload(NULL, 2 * (size_t)T * H);
    t->d_h = upload(NULL, 2 * (size_t)T * K * I);
    free(w13), free(w2), free(f);
}

/* The device quantizer against the host's, on this rank's experts; and a NaN refused. */
static int check_weights_quantized(struct test *t)
{
    char err[512];
    const int EL = t->EL;
    int rc = mok_quantize_weights_fp8_block(t->d_w13, EL, 2 * I, H, t->d_w13q, t->d_w13s, t->st, err, sizeof err);
    CK(rc == MOK_OK, "quantize w13: %s (%s)", mok_status_string(rc), err);
    rc = mok_quantize_weights_fp8_block(t->d_w2, EL, H, I, t->d_w2q, t->d_w2s, t->st, err, sizeof err);
    CK(rc == MOK_OK, "quantize w2: %s (%s)", mok_status_string(rc), err);
    const size_t l13 = (size_t)EL * 2 * I * H, l2 = (size_t)EL * H * I;
    uint8_t *q = malloc(l13 > l2 ? l13 : l2);
    float *sc = malloc(sizeof(float) * l13 / 16384);
    cudaMemcpy(q, t->d_w13q, l13, cudaMemcpyDeviceToHost);
    cudaMemcpy(sc, t->d_w13s, sizeof(float) * l13 / 16384, cudaMemcpyDeviceToHost);
    int same = !memcmp(q, t->w13q + (size_t)t->rank * l13, l13) &&
               !memcmp(sc, t->w13s + (size_t)t->rank * l13 / 16384, sizeof(float) * l13 / 16384);
    cudaMemcpy(q, t->d_w2q, l2, cudaMemcpyDeviceToHost);
    cudaMemcpy(sc, t->d_w2s, sizeof(float) * l2 / 16384, cudaMemcpyDeviceToHost);
    same = same && !memcmp(q, t->w2q + (size_t)t->rank * l2, l2) &&
           !memcmp(sc, t->w2s + (size_t)t->rank * l2 / 16384, sizeof(float) * l2 / 16384);
    free(q), free(sc);
    CK(same, "mok_quantize_weights_fp8_block differs from src/fp8.c's quantizer");
    /* a NaN in w: refused by name, nothing else disturbed (the copy is quantized into scratch) */
    uint16_t nan = 0x7FC0, *d_bad = upload(NULL, 2 * (size_t)2 * I * H);
    uint8_t *d_q = upload(NULL, (size_t)2 * I * H);
    float *d_s = upload(NULL, sizeof(float) * 2 * I * H / 16384);
    cudaMemcpy(d_bad, t->d_w13, 2 * (size_t)2 * I * H, cudaMemcpyDeviceToDevice);
    cudaMemcpy(d_bad + 77, &nan, 2, cudaMemcpyHostToDevice);
    rc = mok_quantize_weights_fp8_block(d_bad, 1, 2 * I, H, d_q, d_s, t->st, err, sizeof err);
    cudaFree(d_bad), cudaFree(d_q), cudaFree(d_s);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "NaN"), "a NaN weight: %s (%s)", mok_status_string(rc), err);
    return 0;
}

/* Row v [n] quantized 1 x 128 by the host and dequantized (the reference's operand). */
static void quant_deq_row(const float *v, int n, float *out)
{
    uint8_t q[H > I ? H : I];
    float s[(H > I ? H : I) / 128];
    mok_quant_fp8_block_rows(v, 1, (size_t)n, q, s);
    for (int c = 0; c < n; c++)
        out[c] = mok_e4m3_to_f32(q[c]) * s[c / 128];
}


/* h and y of every route of this rank's tokens against the references (see the top); max errors of max |ref|. */
static int check_outputs(const struct test *t, const uint16_t *h, const uint16_t *y, double *h_rel, double *y_rel)
{
    float xd[H], g[2 * I], hr[I], hd[I], o[H];
    double h_err = 0, h_max = 0, y_err = 0, y_max = 0;
    for (int tok = 0; tok < t->T; tok++) {
        float acc[H] = {0};
        quant_deq_row(t->x + (size_t)tok * H, H, xd);
        for (int j = 0; j < K; j++) {
            const int e = t->ids[tok * K + j];
            for (int n = 0; n < 2 * I; n++) {
                float a = 0;
                for (int c = 0; c < H; c++)
                    a += xd[c] * t->w13d[((size_t)e * 2 * I + n) * H + c];
                g[n] = round_bf16(a);
            }
            const uint16_t *hrow = h + ((size_t)tok * K + j) * I;
            for (int n = 0; n < I; n++) {
                hr[n] = round_bf16(g[n] / (1.0f + expf(-g[n])) * g[I + n]);
                h_err = fmax(h_err, fabs((double)bf16_to_f32(hrow[n]) - hr[n]));
                h_max = fmax(h_max, fabs((double)hr[n]));
                hd[n] = bf16_to_f32(hrow[n]);
            }
            quant_deq_row(hd, I, hd); /* y's reference from the run's own h */
            for (int n = 0; n < H; n++) {
                float a = 0;
                for (int c = 0; c < I; c++)
                    a += hd[c] * t->w2d[((size_t)e * H + n) * I + c];
                o[n] = round_bf16(a);
                acc[n] += t->w[tok * K + j] * o[n];
            }
        }
        for (int n = 0; n < H; n++) {
            y_err = fmax(y_err, fabs((double)bf16_to_f32(y[(size_t)tok * H + n]) - acc[n]));
            y_max = fmax(y_max, fabs((double)acc[n]));
        }
    }
    *h_rel = h_max > 0 ? h_err / h_max : h_err;
    *y_rel = y_max > 0 ? y_err / y_max : y_err;
    CK(*h_rel <= 1e-2 && *y_rel <= 1e-2, "h error %.3e, y error %.3e of max |ref| (allowed 1e-2; NaN: unwritten)",
       *h_rel, *y_rel);
    return 0;
}

/* One forward (y poisoned first) and the export of h, into host buffers. */
static int forward(const struct test *t, mok_workspace *ws, const struct mok_weights *wt, uint16_t *y, uint16_t *h)
{
    char err[512];
    const size_t yb = 2 * (size_t)t->T * H, hb = 2 * (size_t)t->T * K * I;
    cudaMemsetAsync(t->d_y, 0xFF, yb, t->st);
    cudaMemsetAsync(t->d_h, 0xFF, hb, t->st);
    cudaMemcpyAsync(mok_workspace_input(ws, 0), t->x16, yb, cudaMemcpyHostToDevice, t->st);
    int rc = mok_route(ws, 0, t->T, t->d_ids, t->d_w, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_route: %s (%s)", mok_status_string(rc), err);
    rc = mok_forward(ws, wt, t->d_y, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_forward: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_check(ws, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_workspace_check: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_export_h(ws, t->d_h, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_workspace_export_h: %s (%s)", mok_status_string(rc), err);
    cudaMemcpy(y, t->d_y, yb, cudaMemcpyDeviceToHost);
    cudaMemcpy(h, t->d_h, hb, cudaMemcpyDeviceToHost);
    return 0;
}

struct variant {
    int comm_sms, send, per_rank, raster;
};

static int run_variant(const struct test *t, ncclComm_t comm, const struct variant *v)
{
    char err[512];
    struct mok_layer_desc d = {.hidden = H, .intermediate = I, .experts = E, .topk = K, .max_tokens = t->T_MAX,
                               .capacity_factor = 4.0, .input_slots = 1, .comm_sms = v->comm_sms,
                               .combine_per_rank = v->per_rank, .send_from_gemm = v->send, .chunk_rows = 7,
                               .dispatch_push = 1, .raster = v->raster, .dtype = MOK_LAYER_FP8_BLOCK};
    mok_workspace *ws = NULL;
    int rc = mok_workspace_create(comm, &d, t->st, &ws, err, sizeof err);
    CK(rc == MOK_OK, "create: %s (%s)", mok_status_string(rc), err);
    const struct mok_weights bf16 = {.w13 = t->d_w13, .w2 = t->d_w2};
    const struct mok_weights wt = {.w13_e4m3 = t->d_w13q, .w13_scale = t->d_w13s, .w2_e4m3 = t->d_w2q,
                                   .w2_scale = t->d_w2s};
    rc = mok_workspace_export_h(ws, t->d_h, t->st, err, sizeof err);
    int fails = rc != MOK_ERR_ORDER;
    if (fails)
        fprintf(stderr, "rank %d: export_h before a forward: %s (%s)\n", t->rank, mok_status_string(rc), err);
    rc = mok_forward_kernel(ws, &bf16, MOK_VARIANT_FULL, t->st, err, sizeof err);
    if (rc != MOK_ERR_ARGUMENT || !strstr(err, "MOK_LAYER_FP8_BLOCK")) {
        fprintf(stderr, "rank %d: bf16 weights to an fp8_block workspace: %s (%s)\n", t->rank, mok_status_string(rc),
                err);
        fails++;
    }
    uint16_t *y = malloc(2 * (size_t)t->T * H), *y2 = malloc(2 * (size_t)t->T * H);
    uint16_t *h = malloc(2 * (size_t)t->T * K * I);
    double h_rel = 0, y_rel = 0;
    fails += forward(t, ws, &wt, y, h);
    if (!fails)
        fails += check_outputs(t, h, y, &h_rel, &y_rel);
    if (!fails) {
        fails += forward(t, ws, &wt, y2, h);
        if (!fails && memcmp(y, y2, 2 * (size_t)t->T * H)) {
            fprintf(stderr, "rank %d: a second forward's y differs (not bitwise repeatable)\n", t->rank);
            fails++;
        }
    }
    mok_workspace_destroy(ws);
    free(y), free(y2), free(h);
    if (!fails && t->rank == 0)
        printf("ok   fp8_block comm_sms %d, send %d, per_rank %d, raster %d: h err %.2e, y err %.2e of max|ref|, "
               "bitwise repeatable\n", v->comm_sms, v->send, v->per_rank, v->raster, h_rel, y_rel);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct test tt = {0}, *t = &tt;
    ncclComm_t comm;
    int rc0 = libmok_start(&argc, &argv, E, &t->rank, &t->nranks, &comm);
    if (rc0)
        return rc0;
    cudaStreamCreate(&t->st);
    make_test(t);
    int failures = check_weights_quantized(t);
    const struct variant variants[] = {{4, 1, 0, 1}, {2, 0, 0, 0}, {2, 0, 1, 1}, {3, 1, 0, 0}};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        failures += run_variant(t, comm, &variants[v]);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t->rank == 0)
        printf("%s: %d failure(s)\n", all ? "FAIL" : "PASS", all);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return all ? 1 : 0;
}
