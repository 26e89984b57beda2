/* libmok's calls outside a forward's order (include/libmok.h): fp8_block and mxfp8 weights quantized from bf16
 * (setup; mxfp8's also as their MX values in bf16 for mx_scheme 3), and the last forward's h per route for checks. */
#include <stdint.h>

#include "check_call.h"
#include "workspace.h"

int mok_quantize_weights_fp8_block(const uint16_t *w, int matrices, int rows, int k, uint8_t *q, float *scale,
                                   cudaStream_t stream, char *err, int err_len)
{
    if (!w || !q || !scale)
        return say(err, err_len, MOK_ERR_ARGUMENT, "w, q and scale: device pointers");
    if (matrices < 1 || rows < 128 || rows % 128 || k < 128 || k % 128)
        return say(err, err_len, MOK_ERR_ARGUMENT, "matrices = %d, rows = %d, k = %d: matrices >= 1, rows and k "
                   "positive multiples of 128 (128 x 128 blocks)", matrices, rows, k);
    if ((uintptr_t)w % 16 || (uintptr_t)q % 8)
        return say(err, err_len, MOK_ERR_ARGUMENT, "w 16-byte and q 8-byte aligned (vector loads and stores)");
    int32_t *status = NULL, bad = 0;
    MOK_CHECK(cuda, cudaMalloc((void **)&status, sizeof(int32_t)), return MOK_ERR_CUDA);
    cudaError_t e = cudaMemsetAsync(status, 0, sizeof(int32_t), stream);
    if (e == cudaSuccess)
        e = (cudaError_t)mok_quant_fp8_block_weights_bf16(w, matrices, rows, k, q, scale, status,
                                                          (mok_stream_t)stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&bad, status, sizeof bad, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    cudaFree(status);
    if (e != cudaSuccess)
        return say(err, err_len, MOK_ERR_CUDA, "fp8_block weights: %s", cudaGetErrorString(e));
    if (bad)
        return say(err, err_len, MOK_ERR_ARGUMENT, "fp8_block weights: w holds inf or NaN");
    return MOK_OK;
}

int mok_quantize_weights_mxfp8(const uint16_t *w, int matrices, int rows, int k, int gate_up, uint8_t *q,
                               uint8_t *scale_tiles, cudaStream_t stream, char *err, int err_len)
{
    if (!w || !q || !scale_tiles)
        return say(err, err_len, MOK_ERR_ARGUMENT, "w, q and scale_tiles: device pointers");
    const int row_step = gate_up ? 128 : 64;
    if (matrices < 1 || rows < row_step || rows % row_step || k < 128 || k % 128 || (gate_up != 0 && gate_up != 1))
        return say(err, err_len, MOK_ERR_ARGUMENT, "matrices = %d, rows = %d, k = %d, gate_up = %d: matrices >= 1, "
                   "rows a positive multiple of %d, k of 128, gate_up 0 or 1", matrices, rows, k, gate_up, row_step);
    if ((uintptr_t)scale_tiles % 16)
        return say(err, err_len, MOK_ERR_ARGUMENT, "scale_tiles 16-byte aligned (the kernel loads them by TMA)");
    const size_t n_rows = (size_t)matrices * rows;
    if (n_rows > (size_t)INT32_MAX)
        return say(err, err_len, MOK_ERR_ARGUMENT, "matrices x rows = %zu: at most 2^31 - 1", n_rows);
    int32_t *status = NULL, bad = 0;
    uint8_t *plain = NULL; /* the quantizer's [rows][k / 32] scales, before the tile layout */
    MOK_CHECK(cuda, cudaMalloc((void **)&status, sizeof(int32_t)), return MOK_ERR_CUDA);
    cudaError_t e = cudaMalloc((void **)&plain, n_rows * (size_t)(k / 32));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(status, 0, sizeof(int32_t), stream);
    if (e == cudaSuccess)
        e = (cudaError_t)mok_quant_mxfp8_bf16(w, (int)n_rows, k, q, plain, status, (mok_stream_t)stream);
    if (e == cudaSuccess)
        e = (cudaError_t)mok_scale_mx_tiles(plain, matrices, rows, k, gate_up, scale_tiles, (mok_stream_t)stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&bad, status, sizeof bad, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    cudaFree(status);
    cudaFree(plain);
    if (e != cudaSuccess)
        return say(err, err_len, MOK_ERR_CUDA, "mxfp8 weights: %s", cudaGetErrorString(e));
    if (bad)
        return say(err, err_len, MOK_ERR_ARGUMENT, "mxfp8 weights: w holds inf or NaN");
    return MOK_OK;
}

/* Quantized into scratch (e4m3 and the plain [rows][k / 32] scales), expanded back in mx_scheme 3's order: the values
 * are the mxfp8 quantizer's, bit for bit, held in bf16. */
int mok_expand_weights_mxfp8(const uint16_t *w, int matrices, int rows, int k, uint16_t *out, cudaStream_t stream,
                             char *err, int err_len)
{
    if (!w || !out)
        return say(err, err_len, MOK_ERR_ARGUMENT, "w and out: device pointers");
    if (matrices < 1 || rows < 1 || k < 128 || k % 128)
        return say(err, err_len, MOK_ERR_ARGUMENT, "matrices = %d, rows = %d, k = %d: matrices >= 1, rows >= 1, k a "
                   "positive multiple of 128", matrices, rows, k);
    if ((uintptr_t)w % 16 || (uintptr_t)out % 16)
        return say(err, err_len, MOK_ERR_ARGUMENT, "w and out 16-byte aligned (vector loads; the kernel reads out by "
                   "TMA)");
    const size_t n_rows = (size_t)matrices * rows;
    if (n_rows > (size_t)INT32_MAX)
        return say(err, err_len, MOK_ERR_ARGUMENT, "matrices x rows = %zu: at most 2^31 - 1", n_rows);
    int32_t *status = NULL, bad = 0;
    uint8_t *q = NULL, *plain = NULL;
    MOK_CHECK(cuda, cudaMalloc((void **)&status, sizeof(int32_t)), return MOK_ERR_CUDA);
    cudaError_t e = cudaMalloc((void **)&q, n_rows * (size_t)k);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&plain, n_rows * (size_t)(k / 32));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(status, 0, sizeof(int32_t), stream);
    if (e == cudaSuccess)
        e = (cudaError_t)mok_quant_mxfp8_bf16(w, (int)n_rows, k, q, plain, status, (mok_stream_t)stream);
    if (e == cudaSuccess)
        e = (cudaError_t)mok_expand_mxfp8_bf16_k64perm(q, plain, (long long)n_rows, k, out, (mok_stream_t)stream);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(&bad, status, sizeof bad, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(stream);
    cudaFree(status);
    cudaFree(q);
    cudaFree(plain);
    if (e != cudaSuccess)
        return say(err, err_len, MOK_ERR_CUDA, "mxfp8 weights expanded: %s", cudaGetErrorString(e));
    if (bad)
        return say(err, err_len, MOK_ERR_ARGUMENT, "mxfp8 weights expanded: w holds inf or NaN");
    return MOK_OK;
}

int mok_workspace_store_h(mok_workspace *ws, int on, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if (on != 0 && on != 1)
        return say(err, err_len, MOK_ERR_ARGUMENT, "on = %d: 0 or 1", on);
    if (!ws->store_h_word) { /* bf16: GEMM2 reads h, so it is always stored */
        if (!on)
            return say(err, err_len, MOK_ERR_ARGUMENT, "on = 0: only an FP8 forward (desc.dtype MOK_LAYER_FP8_BLOCK "
                       "or MOK_LAYER_MXFP8) can leave h out; bf16's GEMM2 reads it");
        return MOK_OK;
    }
    /* a memset, so that it may be captured into a graph too; the kernel tests the int for nonzero */
    MOK_CHECK(cuda, cudaMemsetAsync(ws->store_h_word, on, sizeof(int32_t), stream), return MOK_ERR_CUDA);
    ws->store_h = on;
    return MOK_OK;
}

/* In passes of as many columns as the combine area holds for t_max x topk routes (its rows are hidden wide; with
 * combine_per_rank there are t_max x ranks of them, src/lsa_layout.c): every rank done with its combine area
 * (barrier), each slot's h columns into its route owner's area, every rank's rows in (barrier), the area copied
 * into h. */
int mok_workspace_export_h(mok_workspace *ws, uint16_t *h, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    const struct mok_lsa_args *a = &ws->a;
    if (!h && a->my_tokens)
        return say(err, err_len, MOK_ERR_ARGUMENT, "h: a device pointer when tokens = %d > 0", a->my_tokens);
    if (ws->step != STEP_IDLE || !ws->fwd_full)
        return out_of_order("mok_workspace_export_h", "a full forward's mok_forward_sum comes first (and no route "
                            "after it)", err, err_len);
    if (!ws->store_h)
        return out_of_order("mok_workspace_export_h", "a forward that stores h (mok_workspace_store_h 1 before it)",
                            err, err_len);
    const int I = ws->mk.inter, H = a->hidden;
    const size_t routes = (size_t)a->my_tokens * a->topk;
    const char *area = (const char *)ws->win_ptr + a->off_comb;
    const size_t area_rows = (size_t)a->t_max * (a->combine_per_rank ? a->nranks : a->topk);
    size_t fit = area_rows * H / ((size_t)a->t_max * a->topk);
    fit = fit >= 8 ? fit / 8 * 8 : fit; /* whole 16-byte vectors where the area allows */
    const int width = fit < (size_t)H ? (int)fit : H;
    for (int c0 = 0; c0 < I; c0 += width) {
        const int cols = I - c0 < width ? I - c0 : width;
        int rc = barrier(ws, stream, err, err_len);
        if (rc)
            return rc;
        MOK_CHECK(cuda, mok_lsa_send_route_rows(a, ws->mk.h, I, c0, cols, (mok_stream_t)stream),
                  return MOK_ERR_CUDA);
        if ((rc = barrier(ws, stream, err, err_len)))
            return rc;
        if (routes)
            MOK_CHECK(cuda, cudaMemcpy2DAsync(h + c0, (size_t)I * 2, area, (size_t)cols * 2, (size_t)cols * 2, routes,
                                              cudaMemcpyDeviceToDevice, stream), return MOK_ERR_CUDA);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(stream), return MOK_ERR_CUDA);
    return MOK_OK;
}
