/* lsa_layer_fp8: lsa-layer's FP8 forward, dtype fp8_block or mxfp8 (lsa_state.h describes its phases). What it adds
 * to the bf16 forward:
 *   - x quantized into e4m3 rows and scales by the format's quantizer in the timed dispatch phase, laid out as wire
 *     rows (kernels/util/fp8_rows.cu) in the set's x slot of the window; the transfers then move rows of wire_bytes
 *     (about half a bf16 row) on a copy of the args whose hidden is wire_bytes / 2. Every place the transfer path
 *     reads hidden addresses rows by it: the owner's x slot (t * hidden * 2, written here at the same stride), the
 *     expert slots xin (slot * hidden * 2, unpacked here at the same stride) and, for dispatch=push, the landing rows;
 *     the window's layout and xin are sized with the real hidden (bf16 rows, larger), so both fit. lsa-layer pulls
 *     into slots, so landing rows are not used. The ready counters count rows, not bytes.
 *   - before the GEMMs, the slots' wire rows unpacked into e4m3 rows and scales for the schedule's padded rows (a
 *     count only the device knows: offset[local experts]), then fp8_mlp.h's GEMMs on them, as nccl's gemm=mok runs
 *     them, h quantized over the same rows. Padding slots hold zeros from setup, or a real row of an earlier set's
 *     schedule: finite either way, so their scales and h are finite.
 *   - export_outputs: h per route brought to the token's rank by the per-route combine on rows of inter bf16, into a
 *     region of the window past the layout, then copied out in route order.
 * The GEMMs read nothing before the whole dispatch is in (overlap=none) and every kernel is stream-ordered, so
 * launch=graph captures the same calls. The transfers address a wire row as hidden / 8 = wire_bytes / 16 vectors,
 * which at most shapes leave a warp loop's last pass short of 32 (hidden 256: 17 vectors): every warp loop over a
 * row must keep its lanes together where it shuffles (lsa_device.cuh fan_out_row). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "fp8_mlp.h"
#include "lsa_state.h"

struct lsa_fp8 {
    int wire_bytes;       /* a wire row (mok_fp8_wire_bytes) */
    uint8_t *xq;          /* [tokens][hidden] e4m3: x quantized */
    void *xs;             /* its scales, hidden / 32 bytes per row (either format) */
    uint8_t *aq, *hq;     /* [capacity][hidden], [capacity][inter] e4m3: the slots' rows unpacked, h quantized */
    void *as, *hs;        /* their scales */
    struct mok_gemm_sm90_config cfg;
    uint16_t *w13x[MOK_MAX_SETS], *w2x[MOK_MAX_SETS]; /* mxfp8 mx_scheme 2, 3: the weights in bf16 (fp8_mlp.h) */
};

static bool fp8_dtype(const struct mok_problem *p)
{
    return p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8;
}

size_t lsa_fp8_window_bytes(const struct mok_problem *p, int t_max)
{
    if (!mok_fp8_layer_on(&p->spec) || !mok_output_find(&p->out, "h"))
        return 0;
    size_t bytes = (size_t)t_max * p->topk * p->inter * 2;
    return (bytes + 255) & ~(size_t)255;
}

int lsa_fp8_supports(const struct mok_problem *p, int mx_scheme, char *why, int why_len)
{
    const struct mok_gemm_sm90_config every_sm = {0};
    struct mok_gemm_sm90_config cfg = mok_fp8_mok_config(&every_sm, (int)p->spec.dtype, mx_scheme);
    return mok_fp8_mok_supports(p, &cfg, why, why_len);
}

int lsa_fp8_setup(struct lsa_state *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    /* host_supports.c refuses these */
    if (!fp8_dtype(p) || mok_pass_has_bwd(p->spec.pass) || s->overlap_gemm1 || s->gemm_portable)
        FAIL("lsa-layer %s: the forward only, kernel=sm90, overlap=none", mok_dtype_name(p->spec.dtype));
    struct lsa_fp8 *f = calloc(1, sizeof(*f));
    if (!f)
        FAIL("out of host memory");
    s->fp8 = f;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, cap = (size_t)s->a.capacity;
    f->wire_bytes = mok_fp8_wire_bytes(p->hidden);
    if ((size_t)f->wire_bytes > H * 2) /* the window's x slots and the expert slots hold bf16 rows */
        FAIL("%s: a wire row of %d bytes exceeds a bf16 row of hidden %d", mok_dtype_name(p->spec.dtype),
             f->wire_bytes, p->hidden);
    f->cfg = mok_fp8_mok_config(&s->gemm_cfg, (int)p->spec.dtype, s->mx_scheme);
    /* scales: k / 32 bytes per row in either format */
    void **bufs[] = {(void **)&f->xq, &f->xs, (void **)&f->aq, &f->as, (void **)&f->hq, &f->hs};
    const size_t bytes[] = {T * H, T * (H / 32), cap * H, cap * (H / 32), cap * I, cap * (I / 32)};
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        MOK_CHECK(cuda, cudaMalloc(bufs[i], bytes[i] + 16), return -1);
        MOK_CHECK(cuda, cudaMemset(*bufs[i], 0, bytes[i] + 16), return -1); /* rows past the schedule's: zeros */
    }
    MOK_CHECK(cuda, cudaMemset(s->a.xin, 0, cap * H * 2), return -1); /* padding slots unpack to finite zeros */
    if (p->spec.dtype == MOK_DTYPE_MXFP8 && s->mx_scheme >= 2)
        return mok_fp8_weights_bf16(p, s->mx_scheme, f->w13x, f->w2x, s->cl->stream, err, err_len);
    return 0;
}

int lsa_fp8_dispatch(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct lsa_fp8 *f = s->fp8;
    /* x's wire rows in order at the stride the transfers read them (below); every peer that pulled this slot's rows
     * in the previous forward has finished: its combine, which this rank's owner sum waited for, came after */
    uint8_t *x_slot = (uint8_t *)s->win.ptr + s->a.off_x + (size_t)set * s->a.x_set_bytes;
    MOK_CHECK(cuda, mok_fp8_quant_rows(p, p->x[set], p->tokens, NULL, p->hidden, f->xq, f->xs, st), return -1);
    MOK_CHECK(cuda, mok_fp8_rows_scatter(f->xq, f->xs, p->hidden, 1, NULL, 0, p->tokens, x_slot, f->wire_bytes,
                                         (mok_stream_t)st), return -1);
    struct mok_lsa_args wire = s->a; /* set and y as lsa_forward_phase set them */
    wire.hidden = f->wire_bytes / 2;
    return lsa_dispatch(s, &wire, set, st, err, err_len);
}

int lsa_fp8_experts(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct lsa_fp8 *f = s->fp8;
    const struct mok_lsa_args *a = &s->a;
    const int32_t *used = a->offset + a->local_experts; /* the schedule's padded rows: what the GEMMs cover */
    MOK_CHECK(cuda, mok_fp8_rows_unpack((const uint8_t *)a->xin, f->wire_bytes, a->capacity, used, p->hidden, f->aq,
                                        f->as, (mok_stream_t)st), return -1);
    const struct mok_fp8_mlp m = {.aq = f->aq, .as = f->as, .h = s->h, .hq = f->hq, .hs = f->hs, .out = s->out,
                                  .offset = a->offset, .e0 = 0, .groups = a->local_experts,
                                  .rows_capacity = a->capacity, .rows_dev = used, .w13x = f->w13x[set],
                                  .w2x = f->w2x[set]};
    return mok_fp8_mok_mlp(p, set, &m, &f->cfg, st, err, err_len);
}

/* Untimed, after a checked run (collective). The per-route combine sends each slot's h row to its route's row of
 * the owner's export region; its done flag carries the last forward's epoch again, which no wait reads any more
 * (the next forward waits for the next epoch). Then every rank's sends are complete (each rank waited for its
 * own, then the barrier) before the owner copies its rows out. */
int lsa_fp8_export(void *state, const struct mok_outputs *out, char *err, int err_len)
{
    struct lsa_state *s = state;
    struct mok_problem *p = s->p;
    uint16_t *h = mok_output_bf16(out, "h");
    if (!h)
        return 0; /* bf16, or a training pass: run wrote every output */
    if (!s->fp8 || !lsa_fp8_window_bytes(p, s->a.t_max))
        FAIL("lsa-layer: the problem's output h has no export region in the window (set up without it)");
    cudaStream_t st = s->cl->stream;
    struct mok_lsa_args e = s->a;
    e.hidden = p->inter, e.expert_out = s->h, e.off_comb = s->off_h, e.combine_per_rank = 0;
    MOK_CHECK(cuda, mok_lsa_combine_routes(&e, s->sms, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    MOK_CHECK(mpi, MPI_Barrier(MPI_COMM_WORLD), return -1);
    const size_t bytes = (size_t)p->tokens * p->topk * p->inter * 2; /* row t * topk + j: route order */
    MOK_CHECK(cuda, cudaMemcpyAsync(h, (const char *)s->win.ptr + s->off_h, bytes, cudaMemcpyDeviceToDevice, st),
              return -1);
    return 0;
}

void lsa_fp8_extras(const struct lsa_state *s, struct mok_row *row)
{
    const struct lsa_fp8 *f = s->fp8;
    row->dispatch_bytes *= (double)f->wire_bytes / (2.0 * s->p->hidden); /* counted as bf16 rows */
    size_t n = strlen(row->note);
    snprintf(row->note + n, sizeof(row->note) - n, "; %s wire rows (%d bytes) through LSA, mok's core (%d x %d tiles, "
             "%s), bf16 combine", mok_dtype_name(s->p->spec.dtype), f->wire_bytes, f->cfg.tile_m, f->cfg.tile_n,
             f->cfg.mx_scheme == 1   ? "e4m3 expanded to bf16"
             : f->cfg.mx_scheme >= 2 ? (f->cfg.mx_scheme == 2 ? "rows expanded to bf16, weights held in bf16"
                                                              : "rows expanded into registers, weights held in bf16")
             : f->cfg.fp8_n == 64    ? "fp8_n 64"
                                     : "fp8_n 128");
}

void lsa_fp8_teardown(struct lsa_state *s)
{
    struct lsa_fp8 *f = s->fp8;
    if (!f)
        return;
    void *dev[] = {f->xq, f->xs, f->aq, f->as, f->hq, f->hs};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    for (int set = 0; set < MOK_MAX_SETS; set++) {
        cudaFree(f->w13x[set]);
        cudaFree(f->w2x[set]);
    }
    free(f);
    s->fp8 = NULL;
}
