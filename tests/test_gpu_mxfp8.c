/* test_gpu_mxfp8: mxfp8's GPU pieces against host computations (src/fp8.c's quantizer, dequantizer and tile layout):
 *   1. the reference GEMM (mok_ref_gemm_mxfp8) against a host double GEMM of the host-dequantized operands, to 1e-5
 *      of max |ref|, m = 1, 37, 200, n = 256, k = 384, a magnitude per 32-block from 2^-6 to 2^6; two wrong
 *      readings of the scales (every row taking row 0's, the weights' scales one per 128 K) must miss by far more;
 *   2. the dequantization to bf16 (mok_dequant_mxfp8_bf16), bit for bit the host's exact values, and mx_scheme 3's
 *      weight expansion (mok_expand_mxfp8_bf16_k64perm) bit for bit the host model's values at their permuted places;
 *   3. the GEMM's B-scale tile layout (mok_scale_mx_tiles), byte for byte the host's, plain and paired halves;
 *   4. scheme (b)'s conversion (kernels/gemm/mx_expand.h) on the device for every code and every scale 0..254, bit
 *      for bit its host model (mok_mx_expand_bf16, itself checked against src/fp8.c's decoder by test_fp8);
 *   5. on sm_90: mok's grouped GEMM with dtype mxfp8 (kernels/mok_gemm.h) on ragged groups (an empty one, one row, 77,
 *      130), GEMM2-like and GEMM1-like with SwiGLU, 2 and 0 (deepest) stages, against a host double GEMM of the
 *      dequantized operands (SwiGLU on bf16-rounded gate and up, as the kernel's epilogue), within 1e-2 of max |ref|
 *      (bf16 output), no NaN (the output is poisoned), rows of no group untouched: mx_scheme 0 with products of 64
 *      and 128 columns; mx_scheme 1 (expanded to bf16) on 128 x 128 and 128 x 256 tiles, and with A's blocks scaled
 *      past 2^7 (scale bytes above 134: the conversion's two multiplies); mx_scheme 2 (A expanded, B's MX values in
 *      bf16 from mok_dequant_mxfp8_bf16) the same, and bit for bit mx_scheme 1's output on the same operands (the
 *      same values through the same consumers); mx_scheme 3 (A into registers, B from mok_expand_mxfp8_bf16_k64perm)
 *      the same against the host (not bitwise: its K order differs within each wgmma step).
 * Exit 0 pass, 1 fail, 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "fp8.h"
#include "gemm/mx_expand.h"
#include "mok_gemm.h"
#include "mok_kernels.h"
#include "testing/mok_test_kernels.h"

#include "check.h"

enum { N = 256, K = 384, NB = K / 32, M_MAX = 200 };

static float rnd(void) { return (float)rand() / RAND_MAX * 2 - 1; }

static void *dev_copy(const void *src, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes + 16) != cudaSuccess)
        return NULL;
    if (src)
        cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* which scales the host GEMM reads: the format's, or one of the wrong readings it must tell apart */
enum scale_reading { RIGHT, A_ROW0, W_PER_128 };

static void host_gemm(const uint8_t *qa, const uint8_t *sa, int m, const uint8_t *qw, const uint8_t *sw, int n, int k,
                      enum scale_reading how, double *c)
{
    const int nb = k / 32;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int kk = 0; kk < k; kk++) {
                int ar = how == A_ROW0 ? 0 : i, wb = how == W_PER_128 ? kk / 128 * 4 : kk / 32;
                double av = (double)mok_e4m3_to_f32(qa[(size_t)i * k + kk]) * mok_e8m0_to_f32(sa[(size_t)ar * nb + kk / 32]);
                double wv = (double)mok_e4m3_to_f32(qw[(size_t)j * k + kk]) * mok_e8m0_to_f32(sw[(size_t)j * nb + wb]);
                acc += av * wv;
            }
            c[(size_t)i * n + j] = acc;
        }
}

/* max |c - ref| / max |ref|; a non-finite c counts as infinite */
static double rel_err(const float *c, const double *ref, size_t n)
{
    double amax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        amax = fmax(amax, fabs(ref[i]));
        dmax = isfinite(c[i]) ? fmax(dmax, fabs(c[i] - ref[i])) : INFINITY;
    }
    return amax > 0 ? dmax / amax : dmax;
}

static void test_reference(const uint8_t *qa, const uint8_t *sa, const uint8_t *qw, const uint8_t *sw)
{
    static float c[M_MAX * N];
    static double ref[M_MAX * N], wrong[M_MAX * N];
    uint8_t *dqa = dev_copy(qa, (size_t)M_MAX * K), *dsa = dev_copy(sa, (size_t)M_MAX * NB);
    uint8_t *dqw = dev_copy(qw, (size_t)N * K), *dsw = dev_copy(sw, (size_t)N * NB);
    float *dc = dev_copy(NULL, sizeof c);
    CHECK(dqa && dsa && dqw && dsw && dc, "reference: allocation");
    const int ms[] = {1, 37, 200};
    for (int t = 0; t < 3 && dc; t++) {
        int m = ms[t];
        size_t n = (size_t)m * N;
        cudaMemset(dc, 0xFF, sizeof c); /* NaN: an unwritten element fails */
        CHECK(mok_ref_gemm_mxfp8(dqa, dsa, m, K, dqw, dsw, N, dc, NULL) == 0, "m %d: launch", m);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "m %d: kernel", m);
        cudaMemcpy(c, dc, n * sizeof *c, cudaMemcpyDeviceToHost);
        host_gemm(qa, sa, m, qw, sw, N, K, RIGHT, ref);
        double err = rel_err(c, ref, n);
        CHECK(err <= 1e-5, "reference m %d: max |c - ref| / max |ref| = %.3g > 1e-5", m, err);
        host_gemm(qa, sa, m, qw, sw, N, K, W_PER_128, wrong);
        double miss = rel_err(c, wrong, n);
        CHECK(miss > 1e-2, "m %d: weight scales per 128 K come as close (%.3g): the data cannot tell", m, miss);
        if (m > 1) {
            host_gemm(qa, sa, m, qw, sw, N, K, A_ROW0, wrong);
            miss = rel_err(c, wrong, n);
            CHECK(miss > 1e-2, "m %d: row 0's scales for every row come as close (%.3g): the data cannot tell", m,
                  miss);
        }
        printf("reference m %3d: max |c - ref| / max |ref| = %.3g\n", m, err);
    }
    CHECK(mok_ref_gemm_mxfp8(dqa, dsa, 1, 200, dqw, dsw, N, dc, NULL) == (int)cudaErrorInvalidValue,
          "k not a multiple of 32 accepted");
    cudaFree(dqa), cudaFree(dsa), cudaFree(dqw), cudaFree(dsw), cudaFree(dc);
}

static void test_dequant(const uint8_t *qa, const uint8_t *sa)
{
    static float host[M_MAX * K];
    static uint16_t got[M_MAX * K];
    mok_dequant_mxfp8(qa, sa, M_MAX, K, host);
    uint8_t *dq = dev_copy(qa, (size_t)M_MAX * K), *ds = dev_copy(sa, (size_t)M_MAX * NB);
    uint16_t *dout = dev_copy(NULL, sizeof got);
    CHECK(dq && ds && dout, "dequant: allocation");
    CHECK(mok_dequant_mxfp8_bf16(dq, ds, M_MAX, K, dout, NULL) == 0 && cudaDeviceSynchronize() == cudaSuccess,
          "dequant launch");
    cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost);
    int bad = 0, inexact = 0;
    for (int i = 0; i < M_MAX * K; i++) {
        uint16_t want = f32_to_bf16(host[i]);
        inexact += bf16_to_f32(want) != host[i]; /* the data stays in bf16's range: every value exact */
        bad += got[i] != want;
    }
    CHECK(inexact == 0, "dequant: %d host values not exact in bf16 (the test's data)", inexact);
    CHECK(bad == 0, "dequant: %d of %d values differ from the host's", bad, M_MAX * K);
    CHECK(mok_dequant_mxfp8_bf16(dq, ds, 1, 100, dout, NULL) == (int)cudaErrorInvalidValue, "k 100 accepted");
    /* mx_scheme 3's weight expansion: the same values, K permuted within each 64-K block (mok_mx_k64_pos) */
    CHECK(mok_expand_mxfp8_bf16_k64perm(dq, ds, M_MAX, K, dout, NULL) == 0 && cudaDeviceSynchronize() == cudaSuccess,
          "k64perm launch");
    cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost);
    bad = 0;
    for (int r = 0; r < M_MAX; r++)
        for (int col = 0; col < K; col++)
            bad += got[(size_t)r * K + (col & ~63) + mok_mx_k64_pos(col & 63)] !=
                   mok_mx_expand_bf16(qa[(size_t)r * K + col], sa[(size_t)r * NB + col / 32]);
    CHECK(bad == 0, "k64perm: %d of %d values differ from the host model's at their permuted place", bad, M_MAX * K);
    CHECK(mok_expand_mxfp8_bf16_k64perm(dq, ds, 1, 96, dout, NULL) == (int)cudaErrorInvalidValue, "k 96 accepted");
    cudaFree(dq), cudaFree(ds), cudaFree(dout);
}

static void test_tiles(void)
{
    enum { MATS = 3, ROWS = 256, TK = 384, TNB = TK / 32, TOTAL = MATS * ROWS * TNB };
    static uint8_t src[TOTAL], want[TOTAL], got[TOTAL];
    for (int i = 0; i < TOTAL; i++)
        src[i] = (uint8_t)(i * 31 + i / 256 * 7);
    uint8_t *dsrc = dev_copy(src, TOTAL), *ddst = dev_copy(NULL, TOTAL);
    CHECK(dsrc && ddst, "tiles: allocation");
    for (int pair = 0; pair < 2; pair++) {
        mok_mxfp8_scale_tiles(src, MATS, ROWS, TK, pair, want);
        cudaMemset(ddst, 0, TOTAL);
        CHECK(mok_scale_mx_tiles(dsrc, MATS, ROWS, TK, pair, ddst, NULL) == 0 && cudaDeviceSynchronize() == cudaSuccess,
              "tiles launch (pair_halves %d)", pair);
        cudaMemcpy(got, ddst, TOTAL, cudaMemcpyDeviceToHost);
        int bad = 0;
        for (int i = 0; i < TOTAL; i++)
            bad += got[i] != want[i];
        CHECK(bad == 0, "tiles (pair_halves %d): %d of %d bytes differ from the host's", pair, bad, TOTAL);
    }
    CHECK(mok_scale_mx_tiles(dsrc, 1, 64, TK, 1, ddst, NULL) == (int)cudaErrorInvalidValue,
          "paired halves of 64 rows accepted");
    cudaFree(dsrc), cudaFree(ddst);
}

/* 4: the device's conversion table against the host model, every code (the NaN codes too: the same operations
 * give the same finite bits) and scale */
static void test_expand(void)
{
    static uint16_t got[255 * 256];
    uint16_t *d = dev_copy(NULL, sizeof got);
    CHECK(d, "expand: allocation");
    if (!d)
        return;
    CHECK(mok_test_mx_expand_table(d, NULL) == 0 && cudaDeviceSynchronize() == cudaSuccess, "expand table launch");
    cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost);
    int bad = 0, sub = 0;
    for (int s = 0; s < 255; s++)
        for (int c = 0; c < 256; c++) {
            const uint16_t want = mok_mx_expand_bf16((uint8_t)c, (uint8_t)s), g = got[s * 256 + c];
            if (g != want && bad++ < 5)
                printf("expand: code %02x scale %d: device %04x, host model %04x\n", c, s, g, want);
            sub += (want & 0x7F80) == 0 && (want & 0x7F); /* bf16 subnormal results */
        }
    CHECK(bad == 0, "expand: %d of %d (code, scale) pairs differ between device and host model", bad, 255 * 256);
    printf("expand: %d values bit for bit the host model's (%d of them bf16 subnormals)\n", 255 * 256, sub);
    cudaFree(d);
}

/* One launch of mok's mxfp8 kernel into c (poisoned first); 0 on success. */
static int run_kernel(struct mok_gemm_args *args, const struct mok_gemm_sm90_config *cfg, uint16_t *c, size_t c_bytes,
                      const char *what)
{
    char why[256];
    cudaMemset(args->c, 0xFF, c_bytes); /* NaN */
    CHECK(mok_gemm_sm90_supports(args, cfg, why, sizeof why), "%s: %s", what, why);
    int rc = mok_gemm_sm90(args, cfg, NULL);
    cudaError_t sync = cudaDeviceSynchronize();
    CHECK(rc == 0 && sync == cudaSuccess, "%s: launch %d, %s", what, rc, cudaGetErrorString(sync));
    cudaMemcpy(c, args->c, c_bytes, cudaMemcpyDeviceToHost);
    return rc == 0 && sync == cudaSuccess ? 0 : -1;
}

/* 5: mok's kernel. rows of groups ragged; B [groups][swiglu ? 2 n_out : n_out][k]; C poisoned. scheme: mx_scheme;
 * a_shift: A's values scaled by 2^a_shift (24: scale bytes near 145, past the single multiply's 134) */
static void test_kernel(int swiglu, int fp8_n, int stages, int scheme, int tile_n, int a_shift)
{
    enum { G = 4, KK = 512, ROWS_CAP = 256 };
    const int rows[G] = {1, 0, 77, 130}; /* 208 rows; the capacity has 48 more that no group owns */
    const int n_out = swiglu ? 128 : 256, b_rows = (swiglu ? 2 : 1) * n_out, kb = KK / 32;
    int32_t offset[G + 1] = {0};
    for (int g = 0; g < G; g++)
        offset[g + 1] = offset[g] + rows[g];
    const int R = offset[G];
    float *a = malloc(sizeof(float) * ROWS_CAP * KK), *b = malloc(sizeof(float) * G * b_rows * KK);
    uint8_t *qa = malloc(ROWS_CAP * KK), *sa = malloc(ROWS_CAP * kb), *qb = malloc((size_t)G * b_rows * KK);
    uint8_t *sb = malloc((size_t)G * b_rows * kb), *tb = malloc((size_t)G * b_rows * kb);
    float *da = malloc(sizeof(float) * ROWS_CAP * KK), *db = malloc(sizeof(float) * G * b_rows * KK);
    uint16_t *c = malloc(2 * (size_t)ROWS_CAP * n_out);
    double *ref = malloc(sizeof(double) * ROWS_CAP * n_out);
    for (int i = 0; i < ROWS_CAP * KK; i++)
        a[i] = ldexpf(rnd(), (i / KK * 3 + i % KK / 32 * 5) % 7 - 3 + a_shift);
    for (int i = 0; i < G * b_rows * KK; i++)
        b[i] = ldexpf(rnd(), (i / KK * 5 + i % KK / 32 * 3) % 7 - 6);
    CHECK(mok_quant_mxfp8(a, ROWS_CAP, KK, qa, sa) == 0 && mok_quant_mxfp8(b, (size_t)G * b_rows, KK, qb, sb) == 0,
          "kernel: host quantization");
    mok_mxfp8_scale_tiles(sb, G, (size_t)b_rows, KK, swiglu, tb);
    mok_dequant_mxfp8(qa, sa, ROWS_CAP, KK, da);
    mok_dequant_mxfp8(qb, sb, (size_t)G * b_rows, KK, db);
    for (int g = 0; g < G; g++)
        for (int r = offset[g]; r < offset[g + 1]; r++)
            for (int j = 0; j < n_out; j++) {
                double acc[2] = {0, 0};
                for (int h = 0; h < (swiglu ? 2 : 1); h++) {
                    const float *brow = db + ((size_t)g * b_rows + (size_t)h * n_out + j) * KK;
                    for (int kk = 0; kk < KK; kk++)
                        acc[h] += (double)da[(size_t)r * KK + kk] * brow[kk];
                }
                if (swiglu) { /* gate and up rounded to bf16 first, as the epilogue does */
                    double gt = bf16_to_f32(f32_to_bf16((float)acc[0])), up = bf16_to_f32(f32_to_bf16((float)acc[1]));
                    acc[0] = gt / (1 + exp(-gt)) * up;
                }
                ref[(size_t)r * n_out + j] = acc[0];
            }
    uint8_t *dqa = dev_copy(qa, ROWS_CAP * KK), *dsa = dev_copy(sa, ROWS_CAP * kb);
    uint8_t *dqb = dev_copy(qb, (size_t)G * b_rows * KK), *dtb = dev_copy(tb, (size_t)G * b_rows * kb);
    uint16_t *dc = dev_copy(NULL, 2 * (size_t)ROWS_CAP * n_out);
    int32_t *doff = dev_copy(offset, sizeof offset);
    /* mx_scheme 2 and 3: B's MX values in bf16, from the plain scales (3: K permuted) */
    uint8_t *dsb = scheme >= 2 ? dev_copy(sb, (size_t)G * b_rows * kb) : NULL;
    uint16_t *dbx = scheme >= 2 ? dev_copy(NULL, 2 * (size_t)G * b_rows * KK) : NULL;
    CHECK(dqa && dsa && dqb && dtb && dc && doff && (scheme < 2 || (dsb && dbx)), "kernel: allocation");
    if (scheme >= 2)
        CHECK((scheme == 3 ? mok_expand_mxfp8_bf16_k64perm : mok_dequant_mxfp8_bf16)(
                  dqb, dsb, (long long)G * b_rows, KK, dbx, NULL) == 0 &&
                  cudaDeviceSynchronize() == cudaSuccess,
              "kernel: B expanded to bf16");
    struct mok_gemm_args args = {.c = dc, .offset = doff, .groups = G, .rows_capacity = ROWS_CAP, .n_out = n_out,
                                 .k = KK, .swiglu = swiglu, .dtype = MOK_GEMM_MXFP8, .a_fp8 = dqa, .b_fp8 = dqb,
                                 .a_mx_scale = dsa, .b_mx_scale = dtb};
    if (scheme >= 2)
        args.b = dbx, args.b_fp8 = NULL, args.b_mx_scale = NULL;
    struct mok_gemm_sm90_config cfg = {.tile_m = 128, .tile_n = tile_n, .stages = stages, .fp8_n = fp8_n,
                                       .mx_scheme = scheme};
    char what[96];
    snprintf(what, sizeof what, "kernel mx_scheme %d tile_n %d swiglu %d fp8_n %3d stages %d a x 2^%d", scheme, tile_n,
             swiglu, fp8_n, stages, a_shift);
    run_kernel(&args, &cfg, c, 2 * (size_t)ROWS_CAP * n_out, what);
    double amax = 0, dmax = 0;
    long long nan = 0, touched = 0;
    for (int i = 0; i < R * n_out; i++)
        amax = fmax(amax, fabs(ref[i]));
    for (int i = 0; i < R * n_out; i++) {
        float v = bf16_to_f32(c[i]);
        if (!isfinite(v))
            nan++;
        else
            dmax = fmax(dmax, fabs(v - ref[i]));
    }
    for (int i = R * n_out; i < ROWS_CAP * n_out; i++)
        touched += c[i] != 0xFFFF;
    double err = amax > 0 ? dmax / amax : dmax;
    CHECK(err <= 1e-2 && nan == 0 && touched == 0, "%s: max err %.3g of max |ref|, %lld NaN, %lld elements past the "
          "groups written", what, err, nan, touched);
    printf("%s: max |c - ref| / max |ref| = %.3g\n", what, err);
    if (scheme == 2) { /* scheme (b) on the same operands: the same bits */
        uint16_t *c1 = malloc(2 * (size_t)ROWS_CAP * n_out);
        struct mok_gemm_args a1 = args;
        struct mok_gemm_sm90_config cfg1 = cfg;
        a1.b = NULL, a1.b_fp8 = dqb, a1.b_mx_scale = dtb, cfg1.mx_scheme = 1;
        CHECK(c1, "kernel: allocation");
        if (c1 && run_kernel(&a1, &cfg1, c1, 2 * (size_t)ROWS_CAP * n_out, what) == 0) {
            long long differ = 0;
            for (int i = 0; i < ROWS_CAP * n_out; i++)
                differ += c1[i] != c[i];
            CHECK(differ == 0, "%s: %lld elements differ from mx_scheme 1's", what, differ);
        }
        free(c1);
    }
    cudaFree(dsb), cudaFree(dbx);
    cudaFree(dqa), cudaFree(dsa), cudaFree(dqb), cudaFree(dtb), cudaFree(dc), cudaFree(doff);
    free(a), free(b), free(qa), free(sa), free(qb), free(sb), free(tb), free(da), free(db), free(c), free(ref);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    static float x[M_MAX * K], w[N * K];
    static uint8_t qa[M_MAX * K], qw[N * K], sa[M_MAX * NB], sw[N * NB];
    srand(13);
    for (int i = 0; i < M_MAX * K; i++)
        x[i] = ldexpf(rnd(), (i / K * 5 + i % K / 32 * 3) % 13 - 6);
    for (int i = 0; i < N * K; i++)
        w[i] = ldexpf(rnd(), (i / K * 7 + i % K / 32 * 2) % 13 - 6);
    CHECK(mok_quant_mxfp8(x, M_MAX, K, qa, sa) == 0 && mok_quant_mxfp8(w, N, K, qw, sw) == 0, "host quantization");
    test_reference(qa, sa, qw, sw);
    test_dequant(qa, sa);
    test_tiles();
    test_expand();
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    if (major == 9) {
        for (int swiglu = 0; swiglu < 2; swiglu++)
            for (int stages = 0; stages <= 2; stages += 2) {
                for (int n = 64; n <= 128; n += 64)
                    test_kernel(swiglu, n, stages, 0, 128, 0);
                for (int scheme = 1; scheme <= 3; scheme++)
                    for (int tile_n = 128; tile_n <= 256; tile_n += 128)
                        test_kernel(swiglu, 128, stages, scheme, tile_n, 0);
            }
        for (int swiglu = 0; swiglu < 2; swiglu++) /* the two-multiply range, against scheme (a) alike */
            for (int scheme = 0; scheme < 4; scheme++)
                test_kernel(swiglu, 128, 0, scheme, scheme ? 256 : 128, 24);
    } else {
        printf("note: not sm_90 (sm_%d0): mok's mxfp8 kernel not run\n", major);
    }
    printf("test_gpu_mxfp8: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
