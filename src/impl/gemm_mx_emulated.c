/* gemm_mx_emulated: cublas-gemm's mxfp8 baseline, dequantize + bf16 GEMMs (gemm_mx_emulated.h says why so). */
#include "gemm_mx_emulated.h"

#include <stdio.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"

void mok_mx_emulated_destroy(struct mok_mx_emulated *m)
{
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(m->w13[s]);
        cudaFree(m->w2[s]);
    }
    cudaFree(m->a);
    cudaFree(m->g1);
    cudaFree(m->h);
    cudaFree(m->h_q);
    cudaFree(m->h_s);
    cudaFree(m->h_deq);
    memset(m, 0, sizeof(*m));
}

int mok_mx_emulated_init(struct mok_mx_emulated *m, const struct mok_problem *p, cudaStream_t stream, char *err,
                         int err_len)
{
    memset(m, 0, sizeof(*m));
    const size_t E = (size_t)p->experts, H = (size_t)p->hidden, I = (size_t)p->inter, R = (size_t)p->gemm_rows;
    const struct mok_mxfp8_operands *q = &p->mx;
    MOK_CHECK(cuda, cudaMalloc((void **)&m->a, R * H * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&m->g1, R * 2 * I * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&m->h, R * I * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&m->h_q, R * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&m->h_s, R * (I / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&m->h_deq, R * I * 2 + 16), return -1);
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&m->w13[s], E * 2 * I * H * 2 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&m->w2[s], E * H * I * 2 + 16), return -1);
        MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(q->w13[s], q->w13_scale[s], (long long)(E * 2 * I), p->hidden,
                                               m->w13[s], (mok_stream_t)stream), return -1);
        MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(q->w2[s], q->w2_scale[s], (long long)(E * H), p->inter, m->w2[s],
                                               (mok_stream_t)stream), return -1);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(stream), return -1);
    return 0;
}

int mok_mx_emulated_run(struct mok_mx_emulated *m, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                        const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                        uint16_t *h, uint16_t *y, char *err, int err_len)
{
    if (!h)
        h = m->h;
    const struct mok_mxfp8_operands *q = &p->mx;
    const int H = p->hidden, I = p->inter, R = p->gemm_rows;
    g->parts = part;
    /* Grouped mode: each mok_expert_gemms_run call writes its A/B/C pointer arrays into pinned host memory and
     * queues their cudaMemcpyAsync to the device on `stream`; the copy reads the host array only when the stream
     * reaches it. GEMM1's call and GEMM2's call pass different rows (in = a, h = h vs in = h_deq, h = h_deq), so
     * with one batch for both, GEMM2's call rewrote the array while GEMM1's copy was still queued behind the x
     * dequantize (always at DeepSeek-V3's shape; back to back on small ones): GEMM1 then read its B from
     * h_deq + row * H, past h_deq's R x I end (an illegal address, or garbage h and y). Each part has its own
     * batch (cublas_gemm.c makes two), and part 2 names the same in as part 1 (no pointer past h_deq's end). */
    const int batch = part == 1 ? 0 : 1;
    if (part == 1) {
        MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(q->a[set], q->a_scale[set], R, H, m->a, (mok_stream_t)stream),
                  return -1);
        MOK_CHECK(cuda_or_cublas, mok_expert_gemms_run(g, stream, batch, groups, ngroups, m->w13[set], m->w2[set], H,
                                                       I, m->a, m->g1, h, y), return -1);
        /* h to mxfp8 as mok-gemm quantizes it (the status flag is the problem's; not read inside a timed run) */
        if (R)
            MOK_CHECK(cuda, mok_quant_mxfp8_bf16(h, R, I, m->h_q, m->h_s, q->status, (mok_stream_t)stream), return -1);
        return 0;
    }
    MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(m->h_q, m->h_s, R, I, m->h_deq, (mok_stream_t)stream), return -1);
    MOK_CHECK(cuda_or_cublas, mok_expert_gemms_run(g, stream, batch, groups, ngroups, m->w13[set], m->w2[set], H, I,
                                                   m->a, m->g1, m->h_deq, y), return -1);
    return 0;
}
