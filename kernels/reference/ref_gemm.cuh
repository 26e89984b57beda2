/* ref_gemm: the references' one SIMT GEMM (kernels/reference/reference.cu's forward, backward.cu's backward):
 * C[m][n] (+)= sum_k A(m, k) B(k, n) in fp32 with operands read through accessors (gathered token rows, bf16 or
 * fp32, row-major or transposed), no tensor cores, no cuBLAS, none of the implementations' code. */
#pragma once

#include "common/common.cuh"

namespace mok_ref {

constexpr int kBM = 64, kBN = 64, kBK = 32;

/* 256 threads, each a 4 x 4 patch of the 64 x 64 tile; shared tiles are k-major so the inner loop reads consecutive
 * floats. Rows of C land at c_row[m] when given. */
template <typename A, typename B>
__global__ void __launch_bounds__(256) ref_gemm_any(A a, B b, int m, int n, int k, float *c, const int32_t *c_row,
                                                    int accumulate)
{
    __shared__ float as[kBK][kBM + 4];
    __shared__ float bs[kBK][kBN + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += kBK) {
        for (int i = threadIdx.x; i < kBM * kBK; i += 256) {
            int row = i / kBK, kk = i % kBK, gk = k0 + kk;
            as[kk][row] = m0 + row < m && gk < k ? a(m0 + row, gk) : 0.0f;
            bs[kk][row] = n0 + row < n && gk < k ? b(gk, n0 + row) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kBK; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(as[kk][ty * 4 + i], bs[kk][tx * 4 + j], acc[i][j]);
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        int gm = m0 + ty * 4 + i;
        if (gm >= m)
            continue;
        size_t dst = c_row ? (size_t)c_row[gm] : (size_t)gm;
        for (int j = 0; j < 4; j++) {
            int gn = n0 + tx * 4 + j;
            if (gn < n)
                c[dst * n + gn] = accumulate ? c[dst * n + gn] + acc[i][j] : acc[i][j];
        }
    }
}

/* Accessors: element (i, j) of a matrix. */
struct Bf16Rows { /* bf16 [*][ld], row i at rows[i] (or i) */
    const uint16_t *p;
    const int32_t *rows;
    int ld;
    __device__ float operator()(int i, int j) const { return mok_bf16_to_f32(p[(size_t)(rows ? rows[i] : i) * ld + j]); }
};
struct Bf16RowsT { /* (i, j) = bf16 row j's column i, rows gathered: a transposed view */
    const uint16_t *p;
    const int32_t *rows;
    int ld;
    __device__ float operator()(int i, int j) const { return mok_bf16_to_f32(p[(size_t)(rows ? rows[j] : j) * ld + i]); }
};
struct ScaledBf16RowsT { /* (i, j) = w[route[j]] x bf16 row rows[j]'s column i: (w dy)^T over the routes */
    const uint16_t *p;
    const int32_t *rows;
    const float *w;
    const int32_t *route;
    int ld;
    __device__ float operator()(int i, int j) const
    {
        return w[route[j]] * mok_bf16_to_f32(p[(size_t)rows[j] * ld + i]);
    }
};
struct F32 { /* fp32 [*][ld] */
    const float *p;
    int ld;
    __device__ float operator()(int i, int j) const { return p[(size_t)i * ld + j]; }
};
struct F32T { /* (i, j) = fp32 row j's column i */
    const float *p;
    int ld;
    __device__ float operator()(int i, int j) const { return p[(size_t)j * ld + i]; }
};

template <typename A, typename B>
int launch_gemm(A a, B b, int m, int n, int k, float *c, const int32_t *c_row, int accumulate, cudaStream_t s)
{
    if (m <= 0 || n <= 0)
        return 0;
    dim3 grid((unsigned)((n + kBN - 1) / kBN), (unsigned)((m + kBM - 1) / kBM));
    ref_gemm_any<<<grid, 256, 0, s>>>(a, b, m, n, k, c, c_row, accumulate);
    return MOK_LAUNCH_RESULT();
}

} // namespace mok_ref
