/* test_libmok_fp8: libmok's FP8 forwards (desc.dtype MOK_LAYER_FP8_BLOCK and MOK_LAYER_MXFP8) driven from a plain C
 * program, against a host reference built on src/fp8.c (the formats' host definition, matched to ml_dtypes; none of
 * libmok's code), each format in turn:
 *   weights   mok_quantize_weights_fp8_block / _mxfp8 on the device, byte for byte the host quantizer's (mxfp8: the
 *             scales in the host's tile layout) and a weight with a NaN refused; mxfp8's mok_expand_weights_mxfp8 (for
 *             mx_scheme 3) bit for bit the host's dequantized values at their places in the kernel's K order;
 *   h         each route's SwiGLU output from mok_workspace_export_h, against GEMM1 in fp32 on the host-quantized
 *             x rows (1 x 128, or per 32) and weights, rounded to bf16 and SwiGLU'd as the bf16 layer, to 1e-2 of
 *             max |ref|;
 *   y         against GEMM2 in fp32 on the exported h quantized by the host, the expert outputs rounded to bf16 and
 *             summed in fp32 over k in order, to 1e-2 (the layer check's split: a re-quantized h turns GEMM1's
 *             last-bit differences into whole e4m3 steps, src/problem_fp8_layer.c);
 * per tuning variant (send_from_gemm, combine_per_rank, comm_sms, raster; mxfp8's mx_scheme 0, 1 and 3, and
 * fp8_block's fp8_tile_n 128 and 256, each refused by the other format), with ragged token counts, y bitwise the
 * same on a second forward and on a third after mok_workspace_store_h 0 (whose export of h is refused), and the
 * calls and weights the dtype does not take refused. Exit 0 pass, 1 fail, 77 skip
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

struct test {
    int rank, nranks, T, T_MAX, EL;
    int mx;                   /* the format under test: 0 fp8_block, 1 mxfp8 */
    cudaStream_t st;
    float *x;                 /* [T][H] the bf16 tokens as floats */
    uint16_t *x16;            /* [T][H] */
    int32_t *ids;
    float *w;
    float *w13f, *w2f;        /* every expert's weights (bf16 values) */
    uint8_t *w13q, *w2q;      /* ... quantized by the host in the format under test */
    void *w13s, *w2s;         /* ... their scales: fp8_block [E][rows / 128][k / 128] fp32, mxfp8 [E rows][k / 32] */
    float *w13d, *w2d;        /* ... and dequantized (the reference's operands) */
    uint16_t *d_w13, *d_w2;   /* this rank's experts, bf16 (device) */
    uint8_t *d_w13q, *d_w2q;  /* ... quantized on the device */
    void *d_w13s, *d_w2s;     /* ... their scales (mxfp8: in the tile layout) */
    uint16_t *d_w13x, *d_w2x; /* mxfp8: their MX values in bf16, mx_scheme 3's K order (mok_expand_weights_mxfp8) */
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

static const size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;

/* Bytes of one format's scales for `rows` x `k` weights (as many matrices as the rows stack). */
static size_t scale_bytes(int mx, size_t rows, size_t k) { return mx ? rows * (k / 32) : rows / 128 * (k / 128) * 4; }

static void make_test(struct test *t)
{
    t->T_MAX = 300, t->T = t->rank == 0 ? t->T_MAX : 123, t->EL = E / t->nranks;
    const int T = t->T, EL = t->EL;
    uint16_t *w13 = malloc(2 * n13), *w2 = malloc(2 * n2);
    t->w13f = malloc(sizeof(float) * n13), t->w2f = malloc(sizeof(float) * n2);
    uint32_t s = 4242;
    for (size_t i = 0; i < n13; i++) {
        w13[i] = f32_to_bf16(uniform(&s) / sqrtf((float)H));
        t->w13f[i] = bf16_to_f32(w13[i]);
    }
    for (size_t i = 0; i < n2; i++) {
        w2[i] = f32_to_bf16(uniform(&s) / sqrtf((float)I));
        t->w2f[i] = bf16_to_f32(w2[i]);
    }
    t->w13q = malloc(n13), t->w2q = malloc(n2), t->w13d = malloc(sizeof(float) * n13);
    t->w2d = malloc(sizeof(float) * n2);
    t->w13s = malloc(scale_bytes(1, n13 / H, H)), t->w2s = malloc(scale_bytes(1, n2 / I, I)); /* the larger */
    /* tokens and routing: distinct experts per token, softmax-like weights; ranks hold different token counts */
    uint32_t r = 99u + 17u * (uint32_t)t->rank;
    t->x = malloc(sizeof(float) * T * H), t->x16 = malloc(2 * (size_t)T * H);
    t->ids = malloc(sizeof(int32_t) * T * K), t->w = malloc(sizeof(float) * T * K);
    for (size_t i = 0; i < (size_t)T * H; i++) {
        t->x16[i] = f32_to_bf16(uniform(&r) * 2.0f);
        t->x[i] = bf16_to_f32(t->x16[i]);
    }
    /* the first half of the tokens' first choice is expert 0: more than 128 rows there at one rank (a second row
     * block, partly padding), under 64 on the others (a half tile all padding), so the kernel's padding paths and
     * GEMM1 pairs in a later row block run (check_schedule) */
    for (int i = 0; i < T; i++) {
        int a = i < T / 2 ? 0 : (int)(lcg(&r) % E), b = (int)(lcg(&r) % (E - 1));
        t->ids[i * K] = a, t->ids[i * K + 1] = b >= a ? b + 1 : b;
        float u = uniform(&r), z = 1.0f + expf(u);
        t->w[i * K] = expf(u) / z, t->w[i * K + 1] = 1.0f / z;
    }
    const size_t l13 = (size_t)EL * 2 * I * H, l2 = (size_t)EL * H * I;
    t->d_w13 = upload(w13 + (size_t)t->rank * l13, 2 * l13);
    t->d_w2 = upload(w2 + (size_t)t->rank * l2, 2 * l2);
    t->d_w13q = upload(NULL, l13), t->d_w2q = upload(NULL, l2);
    t->d_w13s = upload(NULL, scale_bytes(1, l13 / H, H)), t->d_w2s = upload(NULL, scale_bytes(1, l2 / I, I));
    t->d_w13x = upload(NULL, 2 * l13), t->d_w2x = upload(NULL, 2 * l2);
    t->d_ids = upload(t->ids, sizeof(int32_t) * T * K);
    t->d_w = upload(t->w, sizeof(float) * T * K);
    t->d_y = upload(NULL, 2 * (size_t)T * H);
    t->d_h = upload(NULL, 2 * (size_t)T * K * I);
    free(w13), free(w2);
}

/* mx_scheme 3's place of natural K n within its 64-K block, stated here from the wgmma register fragment (lane q of
 * a quad holds K pairs {2q, 2q + 1} and {2q + 8, 2q + 9} of each k16 step kk, filled from natural K 16 q + 4 kk ..
 * + 3), independently of libmok's own definition. */
static size_t k64_place(size_t n)
{
    const size_t q = n / 16, kk = n % 16 / 4, j = n % 4;
    return 16 * kk + 2 * q + j % 2 + 8 * (j / 2);
}

/* One weight matrix set [mats][rows][k] quantized by the host in the format under test, and dequantized. */
static void host_quantize(int mx, const float *w, int mats, int rows, int k, uint8_t *q, void *scale, float *deq)
{
    const size_t n = (size_t)mats * rows * k;
    if (mx) {
        mok_quant_mxfp8(w, (size_t)mats * rows, (size_t)k, q, scale);
        mok_dequant_mxfp8(q, scale, (size_t)mats * rows, (size_t)k, deq);
        return;
    }
    float *s = scale;
    for (int e = 0; e < mats; e++) /* per matrix: the layout struct mok_weights takes */
        mok_quant_fp8_block_weights(w + (size_t)e * rows * k, rows, k, q + (size_t)e * rows * k,
                                    s + (size_t)e * (rows / 128) * (k / 128));
    for (size_t i = 0; i < n; i++) {
        const size_t row = i / k, c = i % k;
        deq[i] = mok_e4m3_to_f32(q[i]) * s[row / 128 * (k / 128) + c / 128];
    }
}

/* The device quantizer against the host's, on this rank's experts (mxfp8: the scales in the tile layout, the host's
 * mok_mxfp8_scale_tiles of its own); and a NaN refused. */
static int check_weights_quantized(struct test *t)
{
    char err[512];
    const int EL = t->EL, mx = t->mx;
    host_quantize(mx, t->w13f, E, 2 * I, H, t->w13q, t->w13s, t->w13d);
    host_quantize(mx, t->w2f, E, H, I, t->w2q, t->w2s, t->w2d);
    int rc = mx ? mok_quantize_weights_mxfp8(t->d_w13, EL, 2 * I, H, 1, t->d_w13q, t->d_w13s, t->st, err, sizeof err)
                : mok_quantize_weights_fp8_block(t->d_w13, EL, 2 * I, H, t->d_w13q, t->d_w13s, t->st, err,
                                                 sizeof err);
    CK(rc == MOK_OK, "quantize w13: %s (%s)", mok_status_string(rc), err);
    rc = mx ? mok_quantize_weights_mxfp8(t->d_w2, EL, H, I, 0, t->d_w2q, t->d_w2s, t->st, err, sizeof err)
            : mok_quantize_weights_fp8_block(t->d_w2, EL, H, I, t->d_w2q, t->d_w2s, t->st, err, sizeof err);
    CK(rc == MOK_OK, "quantize w2: %s (%s)", mok_status_string(rc), err);
    int same = 1;
    for (int m = 0; m < 2; m++) {
        const int rows = m ? H : 2 * I, k = m ? I : H;
        const size_t n = (size_t)EL * rows * k, sb = scale_bytes(mx, (size_t)EL * rows, (size_t)k);
        const uint8_t *hq = (m ? t->w2q : t->w13q) + (size_t)t->rank * n;
        const uint8_t *hs = (const uint8_t *)(m ? t->w2s : t->w13s) + (size_t)t->rank * sb;
        uint8_t *q = malloc(n), *sc = malloc(sb), *tiles = malloc(sb);
        cudaMemcpy(q, m ? t->d_w2q : t->d_w13q, n, cudaMemcpyDeviceToHost);
        cudaMemcpy(sc, m ? t->d_w2s : t->d_w13s, sb, cudaMemcpyDeviceToHost);
        if (mx) /* the host's plain scales into the tile layout the device wrote */
            mok_mxfp8_scale_tiles(hs, (size_t)EL, (size_t)rows, (size_t)k, !m, tiles);
        same = same && !memcmp(q, hq, n) && !memcmp(sc, mx ? tiles : hs, sb);
        free(q), free(sc), free(tiles);
    }
    CK(same, "mok_quantize_weights_%s differs from src/fp8.c's quantizer", mx ? "mxfp8" : "fp8_block");
    if (mx) { /* mx_scheme 3's weights: the host's dequantized values, each at its place in the 64-K block */
        rc = mok_expand_weights_mxfp8(t->d_w13, EL, 2 * I, H, t->d_w13x, t->st, err, sizeof err);
        CK(rc == MOK_OK, "expand w13: %s (%s)", mok_status_string(rc), err);
        rc = mok_expand_weights_mxfp8(t->d_w2, EL, H, I, t->d_w2x, t->st, err, sizeof err);
        CK(rc == MOK_OK, "expand w2: %s (%s)", mok_status_string(rc), err);
        long long differ = 0;
        for (int m = 0; m < 2; m++) {
            const int rows = m ? H : 2 * I, k = m ? I : H;
            const size_t n = (size_t)EL * rows * k;
            const float *hd = (m ? t->w2d : t->w13d) + (size_t)t->rank * n;
            uint16_t *x = malloc(2 * n);
            cudaMemcpy(x, m ? t->d_w2x : t->d_w13x, 2 * n, cudaMemcpyDeviceToHost);
            for (size_t i = 0; i < n; i++) {
                const size_t c = i % (size_t)k;
                differ += x[i - c + (c & ~(size_t)63) + k64_place(c & 63)] != f32_to_bf16(hd[i]);
            }
            free(x);
        }
        CK(differ == 0, "mok_expand_weights_mxfp8: %lld values differ from the host's dequantized ones", differ);
    }
    /* a NaN in w: refused by name, nothing else disturbed (the copy is quantized into scratch) */
    uint16_t nan = 0x7FC0, *d_bad = upload(NULL, 2 * (size_t)2 * I * H);
    uint8_t *d_q = upload(NULL, (size_t)2 * I * H), *d_s = upload(NULL, scale_bytes(1, 2 * I, H));
    cudaMemcpy(d_bad, t->d_w13, 2 * (size_t)2 * I * H, cudaMemcpyDeviceToDevice);
    cudaMemcpy(d_bad + 77, &nan, 2, cudaMemcpyHostToDevice);
    rc = mx ? mok_quantize_weights_mxfp8(d_bad, 1, 2 * I, H, 1, d_q, d_s, t->st, err, sizeof err)
            : mok_quantize_weights_fp8_block(d_bad, 1, 2 * I, H, d_q, (float *)d_s, t->st, err, sizeof err);
    cudaFree(d_bad), cudaFree(d_q), cudaFree(d_s);
    CK(rc == MOK_ERR_ARGUMENT && strstr(err, "NaN"), "a NaN weight: %s (%s)", mok_status_string(rc), err);
    return 0;
}

/* Row v [n] quantized by the host in the format under test (1 x 128, or per 32) and dequantized. */
static void quant_deq_row(int mx, const float *v, int n, float *out)
{
    uint8_t q[H > I ? H : I], e[(H > I ? H : I) / 32];
    float s[(H > I ? H : I) / 128];
    if (mx) {
        mok_quant_mxfp8(v, 1, (size_t)n, q, e);
        mok_dequant_mxfp8(q, e, 1, (size_t)n, out);
        return;
    }
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
        quant_deq_row(t->mx, t->x + (size_t)tok * H, H, xd);
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
            quant_deq_row(t->mx, hd, I, hd); /* y's reference from the run's own h */
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

/* Whether any rank failed: every rank then skips the same collective steps (a rank alone skipping one would leave
 * the others waiting in a barrier or a kernel). */
static int any_rank(int fails)
{
    int any = 0;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* The schedule the routing gave (rows per local expert, after a forward): with one rank it must hold an expert of
 * more than 128 rows and one whose last row block has an all-padding half, or the padding paths went untested. */
static int check_schedule(const struct test *t, mok_workspace *ws)
{
    struct mok_schedule_view v;
    mok_workspace_schedule(ws, &v);
    int32_t rows[E];
    cudaMemcpy(rows, v.rows, sizeof(int32_t) * (size_t)v.local_experts, cudaMemcpyDeviceToHost);
    int big = 0, pad_half = 0;
    for (int e = 0; e < v.local_experts; e++)
        big |= rows[e] > 128, pad_half |= rows[e] % 128 >= 1 && rows[e] % 128 <= 64;
    CK(t->nranks > 1 || (big && pad_half), "the routing gave no expert over 128 rows (%d) or none with an "
       "all-padding half (%d): the padding paths are not tested", big, pad_half);
    return 0;
}

/* One forward (y poisoned first) and the export of h, into host buffers; with store_h 0 the forward runs after
 * mok_workspace_store_h 0 and the export must be refused (h is left as it was; store_h is 1 again after). */
static int forward(const struct test *t, mok_workspace *ws, const struct mok_weights *wt, uint16_t *y, uint16_t *h,
                   int store_h)
{
    char err[512];
    const size_t yb = 2 * (size_t)t->T * H, hb = 2 * (size_t)t->T * K * I;
    cudaMemsetAsync(t->d_y, 0xFF, yb, t->st);
    cudaMemsetAsync(t->d_h, 0xFF, hb, t->st);
    cudaMemcpyAsync(mok_workspace_input(ws, 0), t->x16, yb, cudaMemcpyHostToDevice, t->st);
    int rc = store_h ? MOK_OK : mok_workspace_store_h(ws, 0, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_workspace_store_h 0: %s (%s)", mok_status_string(rc), err);
    rc = mok_route(ws, 0, t->T, t->d_ids, t->d_w, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_route: %s (%s)", mok_status_string(rc), err);
    rc = mok_forward(ws, wt, t->d_y, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_forward: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_check(ws, t->st, err, sizeof err);
    CK(rc == MOK_OK, "mok_workspace_check: %s (%s)", mok_status_string(rc), err);
    rc = mok_workspace_export_h(ws, t->d_h, t->st, err, sizeof err);
    if (!store_h) {
        CK(rc == MOK_ERR_ORDER && strstr(err, "mok_workspace_store_h"), "mok_workspace_export_h after store_h 0: %s "
           "(%s)", mok_status_string(rc), err);
        rc = mok_workspace_store_h(ws, 1, t->st, err, sizeof err);
        CK(rc == MOK_OK, "mok_workspace_store_h 1: %s (%s)", mok_status_string(rc), err);
        cudaMemcpy(y, t->d_y, yb, cudaMemcpyDeviceToHost);
        return 0;
    }
    CK(rc == MOK_OK, "mok_workspace_export_h: %s (%s)", mok_status_string(rc), err);
    cudaMemcpy(y, t->d_y, yb, cudaMemcpyDeviceToHost);
    cudaMemcpy(h, t->d_h, hb, cudaMemcpyDeviceToHost);
    return 0;
}

struct variant {
    int comm_sms, send, per_rank, raster, mx_scheme; /* mx_scheme 1, 3: mxfp8 only (expanded to bf16) */
    int fp8_tile_n;                                  /* 256: fp8_block only (the bf16 kernel's tiles) */
};

static int run_variant(const struct test *t, ncclComm_t comm, const struct variant *v)
{
    char err[512];
    struct mok_layer_desc d = {.hidden = H, .intermediate = I, .experts = E, .topk = K, .max_tokens = t->T_MAX,
                               .capacity_factor = 4.0, .input_slots = 1, .comm_sms = v->comm_sms,
                               .combine_per_rank = v->per_rank, .send_from_gemm = v->send, .chunk_rows = 7,
                               .dispatch_push = 1, .raster = v->raster,
                               .dtype = t->mx ? MOK_LAYER_MXFP8 : MOK_LAYER_FP8_BLOCK, .mx_scheme = v->mx_scheme,
                               .fp8_tile_n = v->fp8_tile_n};
    mok_workspace *ws = NULL;
    if ((!t->mx && v->mx_scheme) || (t->mx && v->fp8_tile_n == 256)) { /* the other format's: refused by name */
        int rc = mok_workspace_create(comm, &d, t->st, &ws, err, sizeof err);
        const char *name = v->mx_scheme ? "mx_scheme" : "fp8_tile_n";
        const int bad = rc != MOK_ERR_ARGUMENT || !strstr(err, name);
        if (bad)
            fprintf(stderr, "rank %d: %s with %s: %s (%s)\n", t->rank, t->mx ? "mxfp8" : "fp8_block", name,
                    mok_status_string(rc), err);
        if (ws)
            mok_workspace_destroy(ws);
        return bad;
    }
    int rc = mok_workspace_create(comm, &d, t->st, &ws, err, sizeof err);
    CK(rc == MOK_OK, "create: %s (%s)", mok_status_string(rc), err);
    const int in_bf16 = t->mx && v->mx_scheme == 3; /* the MX values in bf16 */
    const struct mok_weights bf16 = {.w13 = t->d_w13, .w2 = t->d_w2};
    const struct mok_weights e4m3 = t->mx ? (struct mok_weights){.w13_e4m3 = t->d_w13q, .w13_mx = t->d_w13s,
                                                                 .w2_e4m3 = t->d_w2q, .w2_mx = t->d_w2s}
                                          : (struct mok_weights){.w13_e4m3 = t->d_w13q, .w13_scale = t->d_w13s,
                                                                 .w2_e4m3 = t->d_w2q, .w2_scale = t->d_w2s};
    const struct mok_weights wt = in_bf16 ? (struct mok_weights){.w13 = t->d_w13x, .w2 = t->d_w2x} : e4m3;
    rc = mok_workspace_export_h(ws, t->d_h, t->st, err, sizeof err);
    int fails = rc != MOK_ERR_ORDER;
    if (fails)
        fprintf(stderr, "rank %d: export_h before a forward: %s (%s)\n", t->rank, mok_status_string(rc), err);
    /* the other kind of weights refused by the dtype's name (mx_scheme 3 takes bf16 fields, the others e4m3) */
    rc = mok_forward_kernel(ws, in_bf16 ? &e4m3 : &bf16, MOK_VARIANT_FULL, t->st, err, sizeof err);
    if (rc != MOK_ERR_ARGUMENT || !strstr(err, t->mx ? "MOK_LAYER_MXFP8" : "MOK_LAYER_FP8_BLOCK")) {
        fprintf(stderr, "rank %d: %s weights to this FP8 workspace: %s (%s)\n", t->rank, in_bf16 ? "e4m3" : "bf16",
                mok_status_string(rc), err);
        fails++;
    }
    uint16_t *y = malloc(2 * (size_t)t->T * H), *y2 = malloc(2 * (size_t)t->T * H);
    uint16_t *h = malloc(2 * (size_t)t->T * K * I);
    double h_rel = 0, y_rel = 0;
    fails = any_rank(fails + forward(t, ws, &wt, y, h, 1));
    if (!fails)
        fails = any_rank(check_schedule(t, ws) + check_outputs(t, h, y, &h_rel, &y_rel));
    /* a second forward, and a third without h's bf16 store (what the benchmark times): y bitwise the same */
    for (int store = 1; store >= 0 && !fails; store--) {
        fails = any_rank(forward(t, ws, &wt, y2, h, store));
        if (!fails && memcmp(y, y2, 2 * (size_t)t->T * H)) {
            fprintf(stderr, "rank %d: a forward with store_h %d: y differs (not bitwise repeatable)\n", t->rank,
                    store);
            fails++;
        }
    }
    mok_workspace_destroy(ws);
    free(y), free(y2), free(h);
    if (!fails && t->rank == 0)
        printf("ok   %s mx_scheme %d fp8_tile_n %d comm_sms %d, send %d, per_rank %d, raster %d: h err %.2e, y err "
               "%.2e of max|ref|, bitwise repeatable\n", t->mx ? "mxfp8" : "fp8_block", v->mx_scheme, v->fp8_tile_n,
               v->comm_sms, v->send, v->per_rank, v->raster, h_rel, y_rel);
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
    int failures = 0;
    const struct variant variants[] = {{4, 1, 0, 1, 0, 128}, {2, 0, 0, 0, 0, 128}, {2, 0, 1, 1, 0, 128},
                                       {3, 1, 0, 0, 0, 0},   {4, 1, 0, 1, 1, 0},   {2, 0, 0, 0, 1, 0},
                                       {2, 0, 1, 1, 1, 0},   {4, 1, 0, 1, 0, 256}, {2, 0, 0, 0, 0, 256},
                                       {2, 0, 1, 1, 0, 256}, {4, 1, 0, 1, 3, 0},   {2, 0, 1, 0, 3, 0}};
    for (t->mx = 0; t->mx < 2; t->mx++) {
        if (any_rank(check_weights_quantized(t))) {
            failures++;
            continue;
        }
        for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
            failures += run_variant(t, comm, &variants[v]);
    }
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (t->rank == 0)
        printf("%s: %d failure(s)\n", all ? "FAIL" : "PASS", all);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return all ? 1 : 0;
}
