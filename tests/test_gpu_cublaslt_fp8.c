/* test_gpu_cublaslt_fp8: the cuBLASLt FP8 baseline (src/impl/gemm_cublaslt_fp8.c) against a host double-precision
 * GEMM of the dequantized operands, block-scaled (src/fp8.c's fp8_block quantizers) and per-tensor (one scale per
 * tensor, quantized here with mok_e4m3_from_f32). Several experts' row slices of one activation buffer, with row
 * counts on every path of the block GEMM: n % 4 == 0 in place, n < 4 and small n padded whole, large n % 4 != 0 split
 * (in place plus a padded tail), 0 a no-op; K = 384 pads the weight scales' K blocks (3 -> 4), K = 512 does not.
 * Values differ by up to 2^8 between scale blocks, so a scale read from the wrong place is far outside the tolerance
 * (1e-2 of max |ref|; checked below for a transposed activation-scale read). Experts run last to first into a NaN-
 * poisoned output with guard rows, so a write outside a slice shows. Exit 0 pass, 1 fail, 77 without a GPU; block
 * scaling (Hopper-only in cuBLASLt) is skipped with a message on other GPUs. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "gemm_cublaslt_fp8.h"

#include "bf16.h"
#include "check.h"

#define TOL 1e-2
#define GUARD_ROWS 4
#define MAX_EXPERTS 8

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform(void) /* [0, 1), xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

/* a block's magnitude: 2^e, e in [-4, 4] */
static float block_magnitude(void) { return ldexpf(1.0f, (int)(uniform() * 9.0) - 4); }

/* C[n][N] = A W^T in double, A [n][K] and W [N][K] dequantized: A[r][k] = e4m3(qa) * sa[r * sa_row + (k / 128) *
 * sa_kb], W[j][k] = e4m3(qw) * sw[((j / 128) * sw_nb + k / 128) % sw_count] (per-tensor: strides 0; the modulo only
 * keeps a deliberately wrong stride in bounds). */
static void ref_gemm(int n, int N, int K, const uint8_t *qa, const float *sa, int sa_row, int sa_kb, const uint8_t *qw,
                     const float *sw, int sw_nb, int sw_count, double *out)
{
    double *a = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * K), *w = malloc(sizeof(double) * (size_t)N * K);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < K; k++)
            a[(size_t)r * K + k] = (double)mok_e4m3_to_f32(qa[(size_t)r * K + k]) *
                                   sa[(size_t)r * sa_row + (size_t)(k / MOK_FP8_BLOCK) * sa_kb];
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++)
            w[(size_t)j * K + k] = (double)mok_e4m3_to_f32(qw[(size_t)j * K + k]) *
                                   sw[((size_t)(j / MOK_FP8_BLOCK) * sw_nb + k / MOK_FP8_BLOCK) % (size_t)sw_count];
    for (int r = 0; r < n; r++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += a[(size_t)r * K + k] * w[(size_t)j * K + k];
            out[(size_t)r * N + j] = s;
        }
    free(a);
    free(w);
}

/* max |got - ref| over n x N, NaN counting as infinite; *ref_max = max |ref| */
static double max_err(int n, int N, const uint16_t *got, const double *ref, double *ref_max)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < (size_t)n * N; i++) {
        double d = fabs((double)bf16_to_f32(got[i]) - ref[i]);
        e = d <= e ? e : (d == d ? d : INFINITY);
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
    }
    *ref_max = m;
    return e;
}

static double max_diff(size_t count, const double *x, const double *y)
{
    double e = 0;
    for (size_t i = 0; i < count; i++)
        e = fabs(x[i] - y[i]) > e ? fabs(x[i] - y[i]) : e;
    return e;
}

struct case_desc {
    const char *name;
    int N, K, experts;
    int rows[MAX_EXPERTS];
};

/* Device copies of one scaling's operands; the output has GUARD_ROWS poisoned rows after the last slice. */
struct operands {
    uint8_t *qa, *qw;
    float *sa, *sw; /* block: activation scales in the contract layout, weight scales in cuBLASLt's; tensor: 1, E */
    uint16_t *c;
};

/* A device buffer of bytes, holding src's bytes (src NULL: uninitialized). */
static void *dev_copy(const void *src, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 16) != cudaSuccess)
        return NULL;
    if (src && bytes && cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(d);
        return NULL;
    }
    return d;
}

/* Runs every expert's GEMM (last to first) into the poisoned output and returns it on the host (total + GUARD rows). */
static int run_all(struct mok_lt_fp8 *lt, int block, const struct case_desc *cd, const int *row0,
                   const struct operands *op, size_t total, uint16_t *out, char *err, int err_len)
{
    const int N = cd->N, K = cd->K, L = K / MOK_FP8_BLOCK;
    const size_t c_bytes = (total + GUARD_ROWS) * (size_t)N * sizeof(uint16_t);
    cudaMemset(op->c, 0xFF, c_bytes); /* bf16 0xFFFF: NaN */
    for (int e = cd->experts - 1; e >= 0; e--) {
        const uint8_t *a = op->qa + (size_t)row0[e] * K, *w = op->qw + (size_t)e * N * K;
        uint16_t *c = op->c + (size_t)row0[e] * N;
        int rc = block ? mok_lt_fp8_block_gemm(lt, NULL, cd->rows[e], N, K, a, op->sa + (size_t)row0[e] * L, w,
                                               op->sw + (size_t)e * mok_lt_fp8_weight_scale_floats(N, K), c, err,
                                               err_len)
                       : mok_lt_fp8_tensor_gemm(lt, NULL, cd->rows[e], N, K, a, op->sa, w, op->sw + e, c, err, err_len);
        if (rc)
            return rc;
    }
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce == cudaSuccess)
        ce = cudaMemcpy(out, op->c, c_bytes, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "after the GEMMs: %s", cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

/* Compares every expert's slice with its reference and the guard rows with the poison. */
static void check_all(const char *what, const struct case_desc *cd, const int *row0, size_t total, const uint16_t *out,
                      double *const *ref)
{
    const int N = cd->N;
    for (int e = 0; e < cd->experts; e++) {
        if (!cd->rows[e])
            continue;
        double ref_max, err = max_err(cd->rows[e], N, out + (size_t)row0[e] * N, ref[e], &ref_max);
        CHECK(ref_max > 0 && err <= TOL * ref_max, "%s %s expert %d (%d rows at row %d): max |err| %.4g > %.0e x max "
              "|ref| %.4g", what, cd->name, e, cd->rows[e], row0[e], err, TOL, ref_max);
        printf("  %-7s %s expert %d rows %3d: max |err| / max |ref| = %.2e\n", what, cd->name, e, cd->rows[e],
               ref_max > 0 ? err / ref_max : INFINITY);
    }
    int touched = 0;
    for (size_t i = total * N; i < (total + GUARD_ROWS) * (size_t)N; i++)
        touched += out[i] != 0xFFFF;
    CHECK(touched == 0, "%s %s: %d guard values past the last slice were written", what, cd->name, touched);
}

static void free_operands(struct operands *op)
{
    cudaFree(op->qa), cudaFree(op->qw), cudaFree(op->sa), cudaFree(op->sw), cudaFree(op->c);
    memset(op, 0, sizeof(*op));
}

static void run_case(struct mok_lt_fp8 *lt, const struct case_desc *cd, int do_block)
{
    const int N = cd->N, K = cd->K, E = cd->experts, L = K / MOK_FP8_BLOCK, NB = N / MOK_FP8_BLOCK;
    int row0[MAX_EXPERTS];
    size_t total = 0;
    for (int e = 0; e < E; e++) {
        row0[e] = (int)total;
        total += (size_t)cd->rows[e];
    }
    char err[512] = "";
    float *x = malloc(sizeof(float) * total * K), *w = malloc(sizeof(float) * (size_t)E * N * K);
    uint8_t *qa = malloc(total * K), *qw = malloc((size_t)E * N * K);
    float *sa = malloc(sizeof(float) * total * L), *sw = malloc(sizeof(float) * (size_t)E * NB * L);
    uint16_t *out = malloc(sizeof(uint16_t) * (total + GUARD_ROWS) * N);
    double *ref[MAX_EXPERTS] = {0};
    /* bf16-range inputs: uniform in [-1, 1) times a magnitude per scale block, rounded to bf16 */
    for (size_t r = 0; r < total; r++)
        for (int kb = 0; kb < L; kb++) {
            float m = block_magnitude();
            for (int i = 0; i < MOK_FP8_BLOCK; i++) {
                size_t at = r * K + (size_t)kb * MOK_FP8_BLOCK + i;
                x[at] = bf16_to_f32(f32_to_bf16(m * (float)(2.0 * uniform() - 1.0)));
            }
        }
    for (int e = 0; e < E; e++)
        for (int nb = 0; nb < NB; nb++)
            for (int kb = 0; kb < L; kb++) {
                float m = block_magnitude();
                for (int j = 0; j < MOK_FP8_BLOCK; j++)
                    for (int i = 0; i < MOK_FP8_BLOCK; i++) {
                        size_t row = (size_t)e * N + (size_t)nb * MOK_FP8_BLOCK + j;
                        size_t at = row * K + (size_t)kb * MOK_FP8_BLOCK + i;
                        w[at] = bf16_to_f32(f32_to_bf16(m * (float)(2.0 * uniform() - 1.0)));
                    }
            }
    for (int e = 0; e < E; e++)
        ref[e] = malloc(sizeof(double) * (size_t)(cd->rows[e] ? cd->rows[e] : 1) * N);

    if (do_block) {
        CHECK(mok_quant_fp8_block_rows(x, total, (size_t)K, qa, sa) == 0, "host fp8_block rows");
        for (int e = 0; e < E; e++)
            CHECK(mok_quant_fp8_block_weights(w + (size_t)e * N * K, (size_t)N, (size_t)K, qw + (size_t)e * N * K,
                                              sw + (size_t)e * NB * L) == 0,
                  "host fp8_block weights");
        for (int e = 0; e < E; e++)
            ref_gemm(cd->rows[e], N, K, qa + (size_t)row0[e] * K, sa + (size_t)row0[e] * L, L, 1,
                     qw + (size_t)e * N * K, sw + (size_t)e * NB * L, L, NB * L, ref[e]);
        /* the data make a layout mistake visible: the contract's activation scales read K-block-major (what cuBLASLt
         * would see unconverted) miss the reference by far more than the tolerance */
        int big = 0;
        for (int e = 1; e < E; e++)
            big = cd->rows[e] > cd->rows[big] ? e : big;
        if (cd->rows[big] > 1 && L > 1) {
            double *wrong = malloc(sizeof(double) * (size_t)cd->rows[big] * N), ref_max;
            ref_gemm(cd->rows[big], N, K, qa + (size_t)row0[big] * K, sa + (size_t)row0[big] * L, 1, cd->rows[big],
                     qw + (size_t)big * N * K, sw + (size_t)big * NB * L, L, NB * L, wrong);
            double miss = max_diff((size_t)cd->rows[big] * N, wrong, ref[big]);
            ref_max = 0;
            for (size_t i = 0; i < (size_t)cd->rows[big] * N; i++)
                ref_max = fabs(ref[big][i]) > ref_max ? fabs(ref[big][i]) : ref_max;
            CHECK(miss > 10 * TOL * ref_max, "%s: transposed activation scales miss by only %.3g (max |ref| %.3g): "
                  "the test could not see a layout mistake", cd->name, miss, ref_max);
            free(wrong);
        }
        struct operands op = {0};
        const size_t sw_lt = (size_t)E * mok_lt_fp8_weight_scale_floats(N, K);
        op.qa = dev_copy(qa, total * K);
        op.qw = dev_copy(qw, (size_t)E * N * K);
        op.sa = dev_copy(sa, sizeof(float) * total * L);
        float *sw_dev = dev_copy(sw, sizeof(float) * (size_t)E * NB * L);
        op.sw = dev_copy(NULL, sizeof(float) * sw_lt);
        op.c = dev_copy(NULL, sizeof(uint16_t) * (total + GUARD_ROWS) * N);
        CHECK(op.qa && op.qw && op.sa && sw_dev && op.sw && op.c, "%s: device allocation", cd->name);
        if (op.qa && op.qw && op.sa && sw_dev && op.sw && op.c) {
            int rc = mok_lt_fp8_prepare_weight_scales(NULL, E, N, K, sw_dev, op.sw, err, sizeof err);
            CHECK(rc == 0, "%s: prepare_weight_scales: %s", cd->name, err);
            /* the converted weight scales, exactly: each 128-row block's L scales, then zeros to L4 */
            float *sw_back = malloc(sizeof(float) * sw_lt);
            cudaMemcpy(sw_back, op.sw, sizeof(float) * sw_lt, cudaMemcpyDeviceToHost);
            const size_t L4 = mok_lt_fp8_weight_scale_floats(N, K) / (size_t)NB;
            int bad = 0;
            for (size_t b = 0; b < (size_t)E * NB; b++)
                for (size_t kb = 0; kb < L4; kb++)
                    bad += kb < (size_t)L ? memcmp(&sw_back[b * L4 + kb], &sw[b * L + kb], 4) != 0
                                          : sw_back[b * L4 + kb] != 0;
            CHECK(bad == 0 && L4 == (size_t)(L + 3) / 4 * 4, "%s: %d converted weight scales wrong (L4 %zu)", cd->name,
                  bad, L4);
            free(sw_back);
            rc = run_all(lt, 1, cd, row0, &op, total, out, err, sizeof err);
            CHECK(rc == 0, "%s: block GEMMs: %s", cd->name, err);
            if (rc == 0)
                check_all("block", cd, row0, total, out, ref);
            /* again: every plan is cached now, and the result the same */
            long long calls = mok_lt_fp8_heuristic_calls(lt);
            rc = run_all(lt, 1, cd, row0, &op, total, out, err, sizeof err);
            CHECK(rc == 0 && mok_lt_fp8_heuristic_calls(lt) == calls, "%s: repeated block GEMMs: rc %d (%s), "
                  "heuristic calls %lld -> %lld", cd->name, rc, err, calls, mok_lt_fp8_heuristic_calls(lt));
            if (rc == 0)
                check_all("block", cd, row0, total, out, ref);
        }
        cudaFree(sw_dev);
        free_operands(&op);
    }

    /* per tensor: one scale for all activation rows, one per expert's weights */
    {
        float amax = 0, ta, tw[MAX_EXPERTS];
        for (size_t i = 0; i < total * K; i++)
            amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        ta = amax > 0 ? amax / MOK_E4M3_MAX : 1.0f;
        for (size_t i = 0; i < total * K; i++)
            qa[i] = mok_e4m3_from_f32(x[i] / ta);
        for (int e = 0; e < E; e++) {
            float m = 0;
            const float *we = w + (size_t)e * N * K;
            for (size_t i = 0; i < (size_t)N * K; i++)
                m = fabsf(we[i]) > m ? fabsf(we[i]) : m;
            tw[e] = m > 0 ? m / MOK_E4M3_MAX : 1.0f;
            for (size_t i = 0; i < (size_t)N * K; i++)
                qw[(size_t)e * N * K + i] = mok_e4m3_from_f32(we[i] / tw[e]);
        }
        for (int e = 0; e < E; e++)
            ref_gemm(cd->rows[e], N, K, qa + (size_t)row0[e] * K, &ta, 0, 0, qw + (size_t)e * N * K, &tw[e], 0, 1,
                     ref[e]);
        struct operands op = {0};
        op.qa = dev_copy(qa, total * K);
        op.qw = dev_copy(qw, (size_t)E * N * K);
        op.sa = dev_copy(&ta, sizeof ta);
        op.sw = dev_copy(tw, sizeof(float) * (size_t)E);
        op.c = dev_copy(NULL, sizeof(uint16_t) * (total + GUARD_ROWS) * N);
        CHECK(op.qa && op.qw && op.sa && op.sw && op.c, "%s: device allocation", cd->name);
        if (op.qa && op.qw && op.sa && op.sw && op.c) {
            int rc = run_all(lt, 0, cd, row0, &op, total, out, err, sizeof err);
            CHECK(rc == 0, "%s: per-tensor GEMMs: %s", cd->name, err);
            if (rc == 0)
                check_all("tensor", cd, row0, total, out, ref);
        }
        free_operands(&op);
    }
    for (int e = 0; e < E; e++)
        free(ref[e]);
    free(x), free(w), free(qa), free(qw), free(sa), free(sw), free(out);
}

/* Informational, after every check: whether cuBLASLt takes rows % 4 != 0 in place (the documented rule says no). */
static void probe_unpadded(struct mok_lt_fp8 *lt)
{
    enum { ROWS = 37, N = 256, K = 384, L = K / MOK_FP8_BLOCK };
    static float x[ROWS * K], w[N * K], sa[ROWS * L], sw[(N / MOK_FP8_BLOCK) * L];
    static uint8_t qa[ROWS * K], qw[N * K];
    static uint16_t out[ROWS * N];
    static double ref[ROWS * N];
    for (int i = 0; i < ROWS * K; i++)
        x[i] = bf16_to_f32(f32_to_bf16((float)(2.0 * uniform() - 1.0)));
    for (int i = 0; i < N * K; i++)
        w[i] = bf16_to_f32(f32_to_bf16((float)(2.0 * uniform() - 1.0)));
    mok_quant_fp8_block_rows(x, ROWS, K, qa, sa);
    mok_quant_fp8_block_weights(w, N, K, qw, sw);
    ref_gemm(ROWS, N, K, qa, sa, L, 1, qw, sw, L, (N / MOK_FP8_BLOCK) * L, ref);
    uint8_t *dqa = dev_copy(qa, sizeof qa), *dqw = dev_copy(qw, sizeof qw);
    float *dsa = dev_copy(sa, sizeof sa), *dsw = dev_copy(sw, sizeof sw);
    float *dsw_lt = dev_copy(NULL, sizeof(float) * mok_lt_fp8_weight_scale_floats(N, K));
    uint16_t *dc = dev_copy(NULL, sizeof out);
    char err[512] = "";
    int rc = -1;
    if (dqa && dqw && dsa && dsw && dsw_lt && dc &&
        mok_lt_fp8_prepare_weight_scales(NULL, 1, N, K, dsw, dsw_lt, err, sizeof err) == 0) {
        mok_lt_fp8_set_unpadded(lt, 1);
        rc = mok_lt_fp8_block_gemm(lt, NULL, ROWS, N, K, dqa, dsa, dqw, dsw_lt, dc, err, sizeof err);
        mok_lt_fp8_set_unpadded(lt, 0);
    }
    cudaError_t ce = rc == 0 ? cudaDeviceSynchronize() : cudaSuccess;
    if (rc != 0)
        printf("probe: %d rows unpadded refused: %s\n", ROWS, err);
    else if (ce != cudaSuccess)
        printf("probe: %d rows unpadded faulted: %s\n", ROWS, cudaGetErrorString(ce));
    else {
        double ref_max;
        cudaMemcpy(out, dc, sizeof out, cudaMemcpyDeviceToHost);
        double e = max_err(ROWS, N, out, ref, &ref_max);
        printf("probe: %d rows unpadded accepted, max |err| / max |ref| = %.2e (%s)\n", ROWS,
               ref_max > 0 ? e / ref_max : INFINITY, e <= TOL * ref_max ? "right" : "wrong");
    }
    cudaFree(dqa), cudaFree(dqw), cudaFree(dsa), cudaFree(dsw), cudaFree(dsw_lt), cudaFree(dc);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("test_gpu_cublaslt_fp8 on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    if (prop.major * 10 + prop.minor < 89) {
        printf("SKIP: cuBLASLt FP8 needs sm_89 or later\n");
        return 77;
    }
    const int do_block = prop.major == 9;
    if (!do_block)
        printf("block scaling skipped: cuBLASLt's VEC128_32F / BLK128x128_32F modes are Hopper (sm_90) only\n");

    struct mok_lt_fp8 *lt = NULL;
    char err[512] = "";
    if (mok_lt_fp8_create(&lt, (size_t)32 << 20, err, sizeof err)) {
        printf("FAIL: mok_lt_fp8_create: %s\n", err);
        return 1;
    }
    CHECK(mok_lt_fp8_reserve(lt, 256, 256, 512, err, sizeof err) == 0, "reserve: %s", err);

    /* refused shapes and pointers, with a message */
    uint8_t *d8 = dev_copy(NULL, 4096);
    float *df = dev_copy(NULL, 4096);
    uint16_t *d16 = dev_copy(NULL, 4096);
    err[0] = 0;
    CHECK(mok_lt_fp8_block_gemm(lt, NULL, 4, 100, 384, d8, df, d8, df, d16, err, sizeof err) != 0 &&
              strstr(err, "N 100"),
          "N = 100 accepted or not named: '%s'", err);
    err[0] = 0;
    CHECK(mok_lt_fp8_tensor_gemm(lt, NULL, 4, 128, 128, d8 + 1, df, d8, df, d16, err, sizeof err) != 0 &&
              strstr(err, "aligned"),
          "a misaligned activation pointer accepted: '%s'", err);
    CHECK(mok_lt_fp8_block_gemm(lt, NULL, 0, 128, 128, d8, df, d8, df, d16, err, sizeof err) == 0, "0 rows: %s",
          err);
    cudaFree(d8), cudaFree(df), cudaFree(d16);

    const struct case_desc cases[] = {
        /* 1, 2: padded whole (< 4 rows); 37: padded whole (copies < a second weight read); 0: nothing; 200: in
         * place; 201: 200 in place and 1 padded */
        {"N256_K384", 256, 384, 6, {1, 37, 0, 200, 201, 2}},
        /* L = 4: weight scales as they are; 130: 128 in place and 2 padded */
        {"N128_K512", 128, 512, 3, {64, 3, 130}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(lt, &cases[i], do_block);
    if (do_block)
        probe_unpadded(lt);
    mok_lt_fp8_destroy(lt);
    printf("test_gpu_cublaslt_fp8: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
