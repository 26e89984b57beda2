/* gemm_cublaslt_fp8: one expert's FP8 GEMM on cuBLASLt, block-scaled and per-tensor (see gemm_cublaslt_fp8.h). */
#include "gemm_cublaslt_fp8.h"

#include <cublasLt.h>
#include <cublas_v2.h> /* cublasGetStatusString, which check_call.h's cublas check prints (cuBLASLt shares the enum) */
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "mok_kernels.h"

#define FP8_BLOCK 128
#define MAX_PLANS 256
#define HEURISTIC_RESULTS 4

enum lt_scaling { LT_BLOCK = 0, LT_TENSOR = 1, LT_SCALINGS };

/* One cached heuristic: the layouts and the algorithm for a (scaling, GEMM rows, N, K, alignments) shape. */
struct lt_plan {
    int used;
    int scaling, rows, N, K;
    unsigned align_w, align_a, align_c; /* bytes, powers of two up to 256: cuBLASLt's MIN_ALIGNMENT preferences */
    cublasLtMatrixLayout_t wdesc, adesc, cdesc;
    cublasLtMatmulAlgo_t algo;
};

struct mok_lt_fp8 {
    cublasLtHandle_t handle;
    cublasLtMatmulDesc_t desc[LT_SCALINGS];
    cublasLtMatmulPreference_t pref;
    void *workspace;
    size_t workspace_bytes;
    float *a_scale; /* activation scales in cuBLASLt's layout, rewritten by every block GEMM */
    size_t a_scale_bytes;
    uint8_t *a_pad; /* rows n % 4 != 0: the rows copied into roundup(rows, 4) */
    size_t a_pad_bytes;
    uint16_t *c_pad; /* and their output before it is copied out */
    size_t c_pad_bytes;
    struct lt_plan plans[MAX_PLANS];
    int next_plan; /* the slot a new plan takes once all are used: oldest first */
    long long heuristic_calls;
    int unpadded;
};

static size_t round4(size_t x) { return (x + 3) / 4 * 4; }

/* Alignment of p in bytes, capped at 256 (cuBLASLt's default assumption). */
static unsigned align_of(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    unsigned a = 256;
    while (a > 1 && (u & (a - 1)))
        a >>= 1;
    return a;
}

/* Whether a call of n_rows % 4 != 0 rows sends them all through the padded scratch rather than splitting off the
 * last 1-3 (the header's byte estimate: copies 2 n K + 4 n N against a second read of W, N K). */
static int pads_all_rows(long long n_rows, long long N, long long K)
{
    return n_rows < 4 || 2 * n_rows * K + 4 * n_rows * N <= N * K;
}

/* The most rows the padded scratch holds for shapes up to (max_rows, N, K): pads_all_rows' bound N K / (2 K + 4 N)
 * grows with N and K, and a split pads 4. */
static size_t pad_rows_max(int max_rows, int N, int K)
{
    long long f = (long long)N * K / (2LL * K + 4LL * N); /* the largest n_rows padding takes whole */
    size_t rows = round4((size_t)f);
    if (rows > round4((size_t)max_rows))
        rows = round4((size_t)max_rows);
    return rows < 4 ? 4 : rows;
}

/* Grows a device buffer; the old one may still be read by queued GEMMs, so the device is drained first (setup-time
 * cost: mok_lt_fp8_reserve takes it before anything is timed). */
static int grow(void **buf, size_t *have, size_t need, char *err, int err_len)
{
    if (need <= *have)
        return 0;
    MOK_CHECK(cuda, cudaDeviceSynchronize(), return -1);
    MOK_CHECK(cuda, cudaFree(*buf), return -1);
    *buf = NULL;
    *have = 0;
    MOK_CHECK(cuda, cudaMalloc(buf, need), return -1);
    *have = need;
    return 0;
}

int mok_lt_fp8_create(struct mok_lt_fp8 **out, size_t workspace_bytes, char *err, int err_len)
{
    *out = NULL;
    struct mok_lt_fp8 *lt = calloc(1, sizeof(*lt));
    if (!lt)
        FAIL("mok_lt_fp8_create: out of host memory");
    /* from here every failure frees what is there */
#define CREATE_CHECK(lib, call) MOK_CHECK_AS(lib, call, #call, mok_lt_fp8_destroy(lt); return -1)
    CREATE_CHECK(cublas, cublasLtCreate(&lt->handle));
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    /* the SCALE_MODE attributes are int32_t */
    const int32_t modes[LT_SCALINGS][2] = {
        [LT_BLOCK] = {CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
        [LT_TENSOR] = {CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F},
    };
    for (int s = 0; s < LT_SCALINGS; s++) {
        CREATE_CHECK(cublas, cublasLtMatmulDescCreate(&lt->desc[s], CUBLAS_COMPUTE_32F, CUDA_R_32F));
        CREATE_CHECK(cublas, cublasLtMatmulDescSetAttribute(lt->desc[s], CUBLASLT_MATMUL_DESC_TRANSA, &op_t,
                                                            sizeof op_t));
        CREATE_CHECK(cublas, cublasLtMatmulDescSetAttribute(lt->desc[s], CUBLASLT_MATMUL_DESC_TRANSB, &op_n,
                                                            sizeof op_n));
        /* A is our W, B our activation rows */
        CREATE_CHECK(cublas, cublasLtMatmulDescSetAttribute(lt->desc[s], CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                            &modes[s][0], sizeof modes[s][0]));
        CREATE_CHECK(cublas, cublasLtMatmulDescSetAttribute(lt->desc[s], CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                            &modes[s][1], sizeof modes[s][1]));
        /* FAST_ACCUM stays 0 in both: fp32 accumulation (Hopper's FP8 MMA promoted to fp32 partial sums), which
         * block scaling needs and the per-tensor comparison keeps equal. */
    }
    CREATE_CHECK(cublas, cublasLtMatmulPreferenceCreate(&lt->pref));
    CREATE_CHECK(cublas, cublasLtMatmulPreferenceSetAttribute(lt->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace_bytes, sizeof workspace_bytes));
    if (workspace_bytes)
        CREATE_CHECK(cuda, cudaMalloc(&lt->workspace, workspace_bytes));
    lt->workspace_bytes = workspace_bytes;
#undef CREATE_CHECK
    *out = lt;
    return 0;
}

static void plan_release(struct lt_plan *p)
{
    if (p->wdesc)
        cublasLtMatrixLayoutDestroy(p->wdesc);
    if (p->adesc)
        cublasLtMatrixLayoutDestroy(p->adesc);
    if (p->cdesc)
        cublasLtMatrixLayoutDestroy(p->cdesc);
    memset(p, 0, sizeof(*p));
}

void mok_lt_fp8_destroy(struct mok_lt_fp8 *lt)
{
    if (!lt)
        return;
    for (int i = 0; i < MAX_PLANS; i++)
        plan_release(&lt->plans[i]);
    if (lt->pref)
        cublasLtMatmulPreferenceDestroy(lt->pref);
    for (int s = 0; s < LT_SCALINGS; s++)
        if (lt->desc[s])
            cublasLtMatmulDescDestroy(lt->desc[s]);
    if (lt->handle)
        cublasLtDestroy(lt->handle);
    cudaFree(lt->workspace);
    cudaFree(lt->a_scale);
    cudaFree(lt->a_pad);
    cudaFree(lt->c_pad);
    free(lt);
}

long long mok_lt_fp8_heuristic_calls(const struct mok_lt_fp8 *lt) { return lt->heuristic_calls; }

void mok_lt_fp8_set_unpadded(struct mok_lt_fp8 *lt, int on) { lt->unpadded = on != 0; }

/* count: the call's rows (experts for the weight scales) */
static int check_shape(const char *fn, const char *count_name, int count, int N, int K, char *err, int err_len)
{
    if (count < 0 || N < FP8_BLOCK || K < FP8_BLOCK || N % FP8_BLOCK || K % FP8_BLOCK)
        FAIL("%s: %s %d, N %d, K %d: %s >= 0 and N, K positive multiples of %d", fn, count_name, count, N, K,
             count_name, FP8_BLOCK);
    return 0;
}

int mok_lt_fp8_reserve(struct mok_lt_fp8 *lt, int max_rows, int max_N, int max_K, char *err, int err_len)
{
    if (check_shape("mok_lt_fp8_reserve", "max_rows", max_rows, max_N, max_K, err, err_len))
        return -1;
    size_t L = (size_t)max_K / FP8_BLOCK, pad_rows = pad_rows_max(max_rows, max_N, max_K);
    /* a split call keeps its in-place rows' scales and the 4 tail rows' scales apart: L (rows + 4) */
    if (grow((void **)&lt->a_scale, &lt->a_scale_bytes, L * (round4((size_t)max_rows) + 4) * sizeof(float), err,
             err_len) ||
        grow((void **)&lt->a_pad, &lt->a_pad_bytes, pad_rows * (size_t)max_K, err, err_len) ||
        grow((void **)&lt->c_pad, &lt->c_pad_bytes, pad_rows * (size_t)max_N * sizeof(uint16_t), err, err_len))
        return -1;
    return 0;
}

size_t mok_lt_fp8_weight_scale_floats(int N, int K)
{
    return (size_t)(N / FP8_BLOCK) * round4((size_t)(K / FP8_BLOCK));
}

int mok_lt_fp8_prepare_weight_scales(cudaStream_t stream, int experts, int N, int K, const float *w_scale,
                                     float *lt_w_scale, char *err, int err_len)
{
    if (check_shape("mok_lt_fp8_prepare_weight_scales", "experts", experts, N, K, err, err_len))
        return -1;
    MOK_CHECK(cuda, mok_scale_blk128_lt(w_scale, (long long)experts * (N / FP8_BLOCK), K / FP8_BLOCK, lt_w_scale,
                                        (mok_stream_t)stream),
              return -1);
    return 0;
}

/* The plan of this shape: cached, or made with one heuristic query (the scale pointers already set on the desc). */
static int get_plan(struct mok_lt_fp8 *lt, int scaling, int rows, int N, int K, const void *w, const void *a,
                    const void *c, const struct lt_plan **out, char *err, int err_len)
{
    const unsigned aw = align_of(w), aa = align_of(a), ac = align_of(c);
    struct lt_plan *p = NULL;
    for (int i = 0; i < MAX_PLANS; i++) {
        struct lt_plan *q = &lt->plans[i];
        if (!q->used) {
            if (!p)
                p = q;
            continue;
        }
        if (q->scaling == scaling && q->rows == rows && q->N == N && q->K == K && q->align_w == aw &&
            q->align_a == aa && q->align_c == ac) {
            *out = q;
            return 0;
        }
    }
    if (!p) {
        p = &lt->plans[lt->next_plan];
        lt->next_plan = (lt->next_plan + 1) % MAX_PLANS;
        plan_release(p);
    }
    /* from here a failure leaves the slot empty */
#define PLAN_CHECK(call) MOK_CHECK_AS(cublas, call, #call, plan_release(p); return -1)
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&p->wdesc, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, (int64_t)K));
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&p->adesc, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)rows, (int64_t)K));
    PLAN_CHECK(cublasLtMatrixLayoutCreate(&p->cdesc, CUDA_R_16BF, (uint64_t)N, (uint64_t)rows, (int64_t)N));
    /* cuBLASLt assumes 256-byte aligned operands unless told; an expert's slice at row r sits r K bytes into A */
    const uint32_t pref_align[4] = {aw, aa, ac, ac};
    const cublasLtMatmulPreferenceAttributes_t pref_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        PLAN_CHECK(cublasLtMatmulPreferenceSetAttribute(lt->pref, pref_attr[i], &pref_align[i], sizeof(uint32_t)));
    cublasLtMatmulHeuristicResult_t res[HEURISTIC_RESULTS];
    int found = 0;
    memset(res, 0, sizeof res);
    lt->heuristic_calls++;
    PLAN_CHECK(cublasLtMatmulAlgoGetHeuristic(lt->handle, lt->desc[scaling], p->wdesc, p->adesc, p->cdesc, p->cdesc,
                                              lt->pref, HEURISTIC_RESULTS, res, &found));
#undef PLAN_CHECK
    int pick = -1;
    for (int i = 0; i < found && pick < 0; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= lt->workspace_bytes)
            pick = i;
    if (pick < 0) {
        plan_release(p);
        FAIL("%s:%d: cublasLtMatmulAlgoGetHeuristic: no algorithm (%d returned) for %s FP8 rows %d N %d K %d, "
             "alignments W %u A %u C %u, workspace %zu bytes: %s",
             __FILE__, __LINE__, found, scaling == LT_BLOCK ? "block-scaled" : "per-tensor", rows, N, K, aw, aa, ac,
             lt->workspace_bytes, cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED));
    }
    p->algo = res[pick].algo;
    p->used = 1;
    p->scaling = scaling;
    p->rows = rows;
    p->N = N;
    p->K = K;
    p->align_w = aw;
    p->align_a = aa;
    p->align_c = ac;
    *out = p;
    return 0;
}

/* C^T[N][rows] = W(op T) A(op N) with the given scale pointers (cuBLASLt's A scale is W's, its B scale A's). */
static int lt_matmul(struct mok_lt_fp8 *lt, cudaStream_t stream, int scaling, int rows, int N, int K,
                     const uint8_t *a, const float *a_scale, const uint8_t *w, const float *w_scale, uint16_t *c,
                     char *err, int err_len)
{
    cublasLtMatmulDesc_t d = lt->desc[scaling];
    MOK_CHECK(cublas, cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                                     sizeof w_scale),
              return -1);
    MOK_CHECK(cublas, cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale,
                                                     sizeof a_scale),
              return -1);
    const struct lt_plan *p;
    if (get_plan(lt, scaling, rows, N, K, w, a, c, &p, err, err_len))
        return -1;
    const float one = 1.0f, zero = 0.0f;
    MOK_CHECK(cublas, cublasLtMatmul(lt->handle, d, &one, w, p->wdesc, a, p->adesc, &zero, c, p->cdesc, c, p->cdesc,
                                     &p->algo, lt->workspace, lt->workspace_bytes, stream),
              return -1);
    return 0;
}

/* rows of the block GEMM in place: a, a_scale and c are that slice's; scales land at scale_dst. */
static int block_in_place(struct mok_lt_fp8 *lt, cudaStream_t stream, int rows, int N, int K, const uint8_t *a,
                          const float *a_scale, const uint8_t *w, const float *w_scale, uint16_t *c, float *scale_dst,
                          char *err, int err_len)
{
    MOK_CHECK(cuda, mok_scale_vec128_lt(a_scale, rows, K / FP8_BLOCK, rows, scale_dst, (mok_stream_t)stream),
              return -1);
    return lt_matmul(lt, stream, LT_BLOCK, rows, N, K, a, scale_dst, w, w_scale, c, err, err_len);
}

/* rows (any count) through the padded scratch: copied in, roundup(rows, 4) computed (the pad rows' scales are 0 and
 * their outputs dropped), rows copied out. */
static int block_padded(struct mok_lt_fp8 *lt, cudaStream_t stream, int rows, int N, int K, const uint8_t *a,
                        const float *a_scale, const uint8_t *w, const float *w_scale, uint16_t *c, float *scale_dst,
                        char *err, int err_len)
{
    const int rows4 = (int)round4((size_t)rows);
    MOK_CHECK(cuda, cudaMemcpyAsync(lt->a_pad, a, (size_t)rows * K, cudaMemcpyDeviceToDevice, stream), return -1);
    MOK_CHECK(cuda, mok_scale_vec128_lt(a_scale, rows, K / FP8_BLOCK, rows4, scale_dst, (mok_stream_t)stream),
              return -1);
    if (lt_matmul(lt, stream, LT_BLOCK, rows4, N, K, lt->a_pad, scale_dst, w, w_scale, lt->c_pad, err, err_len))
        return -1;
    MOK_CHECK(cuda, cudaMemcpyAsync(c, lt->c_pad, (size_t)rows * N * sizeof(uint16_t), cudaMemcpyDeviceToDevice,
                                    stream),
              return -1);
    return 0;
}

static int check_pointers(const char *fn, const void *a, const void *w, const void *c, const void *a_scale,
                          const void *w_scale, char *err, int err_len)
{
    if (!a || !w || !c || !a_scale || !w_scale)
        FAIL("%s: a NULL operand or scale", fn);
    if (((uintptr_t)a | (uintptr_t)w | (uintptr_t)c) & 15)
        FAIL("%s: a %p, w %p, c %p must be 16-byte aligned (cuBLASLt's FP8 operands)", fn, a, w, c);
    return 0;
}

int mok_lt_fp8_block_gemm(struct mok_lt_fp8 *lt, cudaStream_t stream, int n_rows, int N, int K, const uint8_t *a,
                          const float *a_scale, const uint8_t *w, const float *lt_w_scale, uint16_t *c, char *err,
                          int err_len)
{
    static const char fn[] = "mok_lt_fp8_block_gemm";
    if (check_shape(fn, "n_rows", n_rows, N, K, err, err_len))
        return -1;
    if (n_rows == 0)
        return 0;
    if (check_pointers(fn, a, w, c, a_scale, lt_w_scale, err, err_len))
        return -1;
    if ((uintptr_t)lt_w_scale & 15)
        FAIL("%s: lt_w_scale %p must be 16-byte aligned (cuBLASLt's scale tensors)", fn, (const void *)lt_w_scale);
    const size_t L = (size_t)K / FP8_BLOCK;
    const int tail = n_rows % 4;
    if (tail == 0 || lt->unpadded) {
        if (grow((void **)&lt->a_scale, &lt->a_scale_bytes, L * round4((size_t)n_rows) * sizeof(float), err, err_len))
            return -1;
        return block_in_place(lt, stream, n_rows, N, K, a, a_scale, w, lt_w_scale, c, lt->a_scale, err, err_len);
    }
    const int whole = pads_all_rows(n_rows, N, K);
    const int main_rows = whole ? 0 : n_rows - tail, pad_rows = whole ? n_rows : tail;
    const size_t pad_rows4 = round4((size_t)pad_rows);
    if (grow((void **)&lt->a_scale, &lt->a_scale_bytes, L * ((size_t)main_rows + pad_rows4) * sizeof(float), err,
             err_len) ||
        grow((void **)&lt->a_pad, &lt->a_pad_bytes, pad_rows4 * (size_t)K, err, err_len) ||
        grow((void **)&lt->c_pad, &lt->c_pad_bytes, pad_rows4 * (size_t)N * sizeof(uint16_t), err, err_len))
        return -1;
    /* the in-place part's scales and the padded part's lie apart (L main_rows is a multiple of 4 floats), so neither
     * GEMM's scales are rewritten under it */
    if (main_rows > 0 &&
        block_in_place(lt, stream, main_rows, N, K, a, a_scale, w, lt_w_scale, c, lt->a_scale, err, err_len))
        return -1;
    return block_padded(lt, stream, pad_rows, N, K, a + (size_t)main_rows * K, a_scale + (size_t)main_rows * L, w,
                        lt_w_scale, c + (size_t)main_rows * N, lt->a_scale + L * (size_t)main_rows, err, err_len);
}

int mok_lt_fp8_tensor_gemm(struct mok_lt_fp8 *lt, cudaStream_t stream, int n_rows, int N, int K, const uint8_t *a,
                           const float *a_scale, const uint8_t *w, const float *w_scale, uint16_t *c, char *err,
                           int err_len)
{
    static const char fn[] = "mok_lt_fp8_tensor_gemm";
    if (check_shape(fn, "n_rows", n_rows, N, K, err, err_len))
        return -1;
    if (n_rows == 0)
        return 0;
    if (check_pointers(fn, a, w, c, a_scale, w_scale, err, err_len))
        return -1;
    return lt_matmul(lt, stream, LT_TENSOR, n_rows, N, K, a, a_scale, w, w_scale, c, err, err_len);
}
