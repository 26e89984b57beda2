/* check: compares an implementation's output (bf16 or fp32) with its fp32 reference. The error of one element is
 * |y - ref| / max|ref|, relative to the output's scale. A per-element relative error is the wrong yardstick
 * here: y is a weighted sum of k bf16 expert rows, and when two large rows nearly cancel, one legitimate bf16
 * rounding difference in one of them (an accumulation-order effect, 2^-8 of that row) is a large fraction of
 * the small result. Unwritten elements are NaN (poisoned) and counted separately. */
#include "common/common.cuh"

__device__ __forceinline__ void atomic_max_pos_float(float *addr, float v)
{
    /* non-negative floats order like their bit patterns */
    atomicMax(reinterpret_cast<unsigned int *>(addr), __float_as_uint(v));
}

__global__ void check_ref_sq_kernel(const float *ref, size_t n, mok_check_sums *sums)
{
    double local = 0.0;
    float amax = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        local += (double)ref[i] * ref[i];
        amax = fmaxf(amax, fabsf(ref[i]));
    }
    for (int off = 16; off; off >>= 1) {
        local += __shfl_down_sync(0xffffffffu, local, off);
        amax = fmaxf(amax, __shfl_down_sync(0xffffffffu, amax, off));
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&sums->ref_sq, local);
        atomic_max_pos_float(&sums->ref_amax, amax);
    }
}

__device__ __forceinline__ float as_f32(uint16_t v) { return mok_bf16_to_f32(v); }
__device__ __forceinline__ float as_f32(float v) { return v; }

template <typename T>
__global__ void check_err_kernel(const T *y, const float *ref, size_t n, float rtol, mok_check_sums *sums)
{
    float scale = sums->ref_amax > 0.0f ? sums->ref_amax : 1e-30f;
    double diff_sq = 0.0;
    float max_rel = 0.0f;
    unsigned long long bad = 0, nan = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = as_f32(y[i]), r = ref[i];
        if (!isfinite(v)) {
            nan++;
            bad++;
            continue;
        }
        float d = fabsf(v - r);
        float rel = d / scale;
        diff_sq += (double)d * d;
        max_rel = fmaxf(max_rel, rel);
        bad += rel > rtol;
    }
    for (int off = 16; off; off >>= 1) {
        diff_sq += __shfl_down_sync(0xffffffffu, diff_sq, off);
        max_rel = fmaxf(max_rel, __shfl_down_sync(0xffffffffu, max_rel, off));
        bad += __shfl_down_sync(0xffffffffu, bad, off);
        nan += __shfl_down_sync(0xffffffffu, nan, off);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&sums->diff_sq, diff_sq);
        atomic_max_pos_float(&sums->max_rel, max_rel);
        atomicAdd(&sums->bad, bad);
        atomicAdd(&sums->nan, nan);
    }
}

template <typename T>
int check_errors(const T *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_sums,
                 mok_stream_t stream)
{
    if (n == 0)
        return 0;
    check_err_kernel<T><<<mok_blocks_for(n, 256, 2048), 256, 0, mok_cuda_stream(stream)>>>(y, ref, n, rtol, dev_sums);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_check_ref_stats(const float *ref, size_t n, struct mok_check_sums *dev_sums, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    check_ref_sq_kernel<<<mok_blocks_for(n, 256, 2048), 256, 0, mok_cuda_stream(stream)>>>(ref, n, dev_sums);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_check_errors_bf16(const uint16_t *y, const float *ref, size_t n, float rtol,
                                     struct mok_check_sums *dev_sums, mok_stream_t stream)
{
    return check_errors(y, ref, n, rtol, dev_sums, stream);
}

extern "C" int mok_check_errors_f32(const float *y, const float *ref, size_t n, float rtol,
                                    struct mok_check_sums *dev_sums, mok_stream_t stream)
{
    return check_errors(y, ref, n, rtol, dev_sums, stream);
}

/* Both passes on stream, the sums copied back and waited for. */
template <typename T>
int check_vs_f32(const T *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_scratch,
                 struct mok_check_sums *host_out, mok_stream_t stream)
{
    cudaStream_t s = mok_cuda_stream(stream);
    int err = (int)cudaMemsetAsync(dev_scratch, 0, sizeof(*dev_scratch), s);
    if (err || (err = mok_check_ref_stats(ref, n, dev_scratch, stream)) ||
        (err = check_errors(y, ref, n, rtol, dev_scratch, stream)))
        return err;
    err = (int)cudaMemcpyAsync(host_out, dev_scratch, sizeof(*host_out), cudaMemcpyDeviceToHost, s);
    if (err)
        return err;
    return (int)cudaStreamSynchronize(s);
}

extern "C" int mok_check_bf16_vs_f32(const uint16_t *y, const float *ref, size_t n, float rtol,
                                     struct mok_check_sums *dev_scratch, struct mok_check_sums *host_out,
                                     mok_stream_t stream)
{
    return check_vs_f32(y, ref, n, rtol, dev_scratch, host_out, stream);
}

extern "C" int mok_check_f32_vs_f32(const float *y, const float *ref, size_t n, float rtol,
                                    struct mok_check_sums *dev_scratch, struct mok_check_sums *host_out,
                                    mok_stream_t stream)
{
    return check_vs_f32(y, ref, n, rtol, dev_scratch, host_out, stream);
}
