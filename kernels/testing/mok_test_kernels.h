/* mok_test_kernels: launchers of the kernels only the GPU tests call (kernels/testing/, the moktestkernels library,
 * never linked into mok-bench or libmok). Return cudaError_t / ncclResult_t values (0 = success). */
#ifndef MOK_TEST_KERNELS_H
#define MOK_TEST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "mok_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A device communicator (ncclDevComm_t*, allocated here) of nccl_comm (an ncclComm_t) with lsa_barrier_count LSA
 * barriers, and its release. */
int mok_devcomm_create(void *nccl_comm, int lsa_barrier_count, void **out_devcomm);
int mok_devcomm_destroy(void *nccl_comm, void *devcomm);
/* Stores value + i into element i (uint32) of LSA peer lsa_peer's window (an ncclWindow_t) at offset_bytes, n
 * elements. */
int mok_lsa_write_peer(void *window, size_t offset_bytes, int lsa_peer, uint32_t value, size_t n,
                       mok_stream_t stream);
/* Reference of the comm path's y on this rank's own data: y[t] = sum_j w[t][j] * x[t] in the combine's order
 * and roundings (per route: one fp32 sum over j; per rank: bf16 partial per rank, then fp32 sum over ranks). */
int mok_lsa_reference(const uint16_t *x, const int32_t *ids, const float *w, int tokens, int topk, int hidden,
                      int local_experts, int nranks, int per_rank, uint16_t *y, mok_stream_t stream);
/* After sleep_ns, copy rows of src into dst chunk by chunk (last first) and release each chunk's ready counter to
 * its target: the GEMM's ready-counter wait fed as the dispatch would (kernels/testing/gemm_feed.cu). */
int mok_gemm_feed(uint16_t *dst, const uint16_t *src, int rows, int row_elems, int chunk_rows, int32_t *ready,
                  const int32_t *target, long long sleep_ns, mok_stream_t stream);
/* mxfp8 scheme (b)'s conversion (kernels/gemm/mx_expand.h) on the device: out[s * 256 + code] = the bf16 bits of
 * e4m3 code x 2^(s - 127) as the kernel computes them, for s 0..254 and every code (out: 255 x 256). */
int mok_test_mx_expand_table(uint16_t *out, mok_stream_t stream);
/* Rows x [rows][k] (k a multiple of 256) quantized by the megakernel's lane-group quantizers (kernels/util/
 * fp8_quant.cuh: mx 0 fp8_block by half warps, scale fp32 [rows][k / 128]; mx 1 mxfp8 by quads, scale e8m0
 * [rows][k / 32]) as its push drives them: a warp per row, 8 values per lane (kernels/testing/quant_lanes.cu). */
int mok_test_quant_lanes(const uint16_t *x, int rows, int k, int mx, uint8_t *q, void *scale, mok_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif
