/* libmok: the workspace and the forward calls of include/libmok.h (the training pass: backward.c), on mok's kernels
 * (kernels/comm/lsa_*.cu for routing publish, schedule and the owner's sum, kernels/megakernel/forward.cu for the
 * fused kernel). mok-bench's `megakernel` implementation runs through libmok only. No MPI: the only collectives are
 * NCCL's (window registration and one barrier). */
#include "libmok.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "lsa_layout.h"
#include "schedule.h"
#include "workspace.h"

int say(char *err, int err_len, int code, const char *fmt, ...)
{
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *mok_status_string(int status)
{
    switch (status) {
    case MOK_OK: return "ok";
    case MOK_ERR_ARGUMENT: return "invalid argument";
    case MOK_ERR_UNSUPPORTED: return "not supported here";
    case MOK_ERR_CUDA: return "CUDA error";
    case MOK_ERR_NCCL: return "NCCL error";
    case MOK_ERR_MEMORY: return "out of memory";
    case MOK_ERR_OVERFLOW: return "expert capacity overflow";
    case MOK_ERR_ORDER: return "call out of order";
    default: return "unknown status";
    }
}

static int check_shape(const struct mok_layer_desc *d, int nranks, char *err, int err_len)
{
    if (d->hidden < 256 || d->hidden % 256)
        return say(err, err_len, MOK_ERR_ARGUMENT, "hidden = %d: a positive multiple of 256", d->hidden);
    if (d->intermediate < 128 || d->intermediate % 128)
        return say(err, err_len, MOK_ERR_ARGUMENT, "intermediate = %d: a positive multiple of 128", d->intermediate);
    if (d->shared_intermediate < 0 || d->shared_intermediate % 128)
        return say(err, err_len, MOK_ERR_ARGUMENT, "shared_intermediate = %d: 0 (no shared experts) or a positive "
                   "multiple of 128", d->shared_intermediate);
    if (d->experts < nranks || d->experts % nranks || d->experts / nranks > 1024)
        return say(err, err_len, MOK_ERR_ARGUMENT, "experts = %d: a multiple of the %d ranks, at most 1024 per rank",
                   d->experts, nranks);
    if (d->topk < 1 || d->topk > 32 || d->topk > d->experts)
        return say(err, err_len, MOK_ERR_ARGUMENT, "topk = %d: 1..min(32, experts)", d->topk);
    if (d->max_tokens < 1 || d->max_tokens >= MOK_SCHED_MAX_TOKENS)
        return say(err, err_len, MOK_ERR_ARGUMENT, "max_tokens = %d: 1..%d", d->max_tokens, MOK_SCHED_MAX_TOKENS - 1);
    if (!(d->capacity_factor > 0))
        return say(err, err_len, MOK_ERR_ARGUMENT, "capacity_factor = %g: positive", d->capacity_factor);
    if (d->input_slots < 1 || d->input_slots > 64)
        return say(err, err_len, MOK_ERR_ARGUMENT, "input_slots = %d: 1..64", d->input_slots);
    return MOK_OK;
}

static int check_flag(const char *field, int v, char *err, int err_len)
{
    if (v != 0 && v != 1)
        return say(err, err_len, MOK_ERR_ARGUMENT, "%s = %d: 0 or 1", field, v);
    return MOK_OK;
}

/* The tuning fields as given (0: default), against the current GPU's SM count. */
static int check_tuning(const struct mok_layer_desc *d, int gpu_sms, char *err, int err_len)
{
    int rc;
    if (d->comm_sms < 0 || d->comm_sms >= gpu_sms)
        return say(err, err_len, MOK_ERR_ARGUMENT, "comm_sms = %d: 0 (default 16) or 1..%d (fewer than the GPU's "
                   "%d SMs: the others compute)", d->comm_sms, gpu_sms - 1, gpu_sms);
    if (d->combine_sms < 0 || d->combine_sms > (d->comm_sms ? d->comm_sms : 16))
        return say(err, err_len, MOK_ERR_ARGUMENT, "combine_sms = %d: 0 (all comm SMs) or 1..comm_sms (%d)",
                   d->combine_sms, d->comm_sms ? d->comm_sms : 16);
    if (d->chunk_rows < 0)
        return say(err, err_len, MOK_ERR_ARGUMENT, "chunk_rows = %d: 0 (default 128) or positive", d->chunk_rows);
    if (d->own_first < 0 || d->own_first > MOK_OWN_FIRST_MAX)
        return say(err, err_len, MOK_ERR_ARGUMENT, "own_first = %d: 0 (off) or 1..%d (leading experts whose own "
                   "rows go first)", d->own_first, MOK_OWN_FIRST_MAX);
    if (d->own_first && !d->dispatch_push)
        return say(err, err_len, MOK_ERR_ARGUMENT, "own_first = %d with dispatch_push = 0: own rows go first only "
                   "when the peers push theirs (dispatch_push = 1)", d->own_first);
    if (d->send_from_gemm && d->combine_per_rank)
        return say(err, err_len, MOK_ERR_ARGUMENT, "send_from_gemm = 1 with combine_per_rank = 1: the GEMM epilogue "
                   "sends one row per route (combine_per_rank = 0)");
    if (d->train && (d->intermediate % 256 || !d->dispatch_push || d->combine_per_rank || !d->send_from_gemm ||
                     d->split_half))
        return say(err, err_len, MOK_ERR_ARGUMENT, "train = 1 needs intermediate a multiple of 256 (%d), dispatch_push "
                   "1 (%d), combine_per_rank 0 (%d), send_from_gemm 1 (%d) and split_half 0 (%d)", d->intermediate,
                   d->dispatch_push, d->combine_per_rank, d->send_from_gemm, d->split_half);
    if (d->wgrad_reduce && !d->train)
        return say(err, err_len, MOK_ERR_ARGUMENT, "wgrad_reduce = 1 with train = 0: there are no weight gradients "
                   "to add");
    if (d->act_recompute && !d->train)
        return say(err, err_len, MOK_ERR_ARGUMENT, "act_recompute = 1 with train = 0: there is no backward to "
                   "recompute for");
    const int comm = d->comm_sms ? d->comm_sms : 16;
    if (d->shared_sms < 0 || (d->shared_sms && (!d->train || !d->shared_intermediate)) ||
        d->shared_sms > gpu_sms - comm - 1)
        return say(err, err_len, MOK_ERR_ARGUMENT, "shared_sms = %d: 0, or with train and shared experts 1..%d (the "
                   "backward kernel keeps comm_sms %d + 1 of the GPU's %d SMs)", d->shared_sms, gpu_sms - comm - 1,
                   comm, gpu_sms);
    if (d->shared_units < 0 || d->shared_units > 1 ||
        (d->shared_units && (!d->train || !d->shared_intermediate || d->shared_intermediate % 256 || d->shared_sms)))
        return say(err, err_len, MOK_ERR_ARGUMENT, "shared_units = %d: 0, or 1 with train (%d), shared experts whose "
                   "shared_intermediate is a multiple of 256 (%d) and shared_sms 0 (%d)", d->shared_units, d->train,
                   d->shared_intermediate, d->shared_sms);
    if (d->dtype != MOK_LAYER_BF16 && d->dtype != MOK_LAYER_FP8_BLOCK && d->dtype != MOK_LAYER_MXFP8)
        return say(err, err_len, MOK_ERR_ARGUMENT, "dtype = %d: MOK_LAYER_BF16 (0), MOK_LAYER_FP8_BLOCK (1) or "
                   "MOK_LAYER_MXFP8 (2)", d->dtype);
    if (d->dtype != MOK_LAYER_BF16 && (!d->dispatch_push || d->train || d->own_first || d->split_half))
        return say(err, err_len, MOK_ERR_ARGUMENT, "dtype = %s needs dispatch_push 1 (%d: the push quantizes the rows "
                   "it sends) and has no train (%d), own_first (%d) or split_half (%d) yet",
                   d->dtype == MOK_LAYER_MXFP8 ? "MOK_LAYER_MXFP8" : "MOK_LAYER_FP8_BLOCK", d->dispatch_push, d->train,
                   d->own_first, d->split_half);
    if (d->swap_tail < 0 || d->swap_tail > 1 ||
        (d->swap_tail && (d->dtype != MOK_LAYER_BF16 || d->train || d->split_half)))
        return say(err, err_len, MOK_ERR_ARGUMENT, "swap_tail = %d: 0, or 1 with dtype MOK_LAYER_BF16, train 0 and "
                   "split_half 0", d->swap_tail);
    if (d->mx_scheme < 0 || d->mx_scheme > 3 || d->mx_scheme == 2 || (d->mx_scheme && d->dtype != MOK_LAYER_MXFP8))
        return say(err, err_len, MOK_ERR_ARGUMENT, "mx_scheme = %d: 0 (promote per 32 K), or with dtype "
                   "MOK_LAYER_MXFP8 1 (expand to bf16 in shared memory) or 3 (the rows into registers, the weights "
                   "given in bf16: mok_expand_weights_mxfp8)", d->mx_scheme);
    if (d->push_all < 0 || d->push_all > 1 || (d->push_all && d->dtype == MOK_LAYER_BF16))
        return say(err, err_len, MOK_ERR_ARGUMENT, "push_all = %d: 0, or 1 with dtype MOK_LAYER_FP8_BLOCK or "
                   "MOK_LAYER_MXFP8 (the bf16 push leaves a rank's own rows in place)", d->push_all);
    if (d->gather < -1 || d->gather > 1 || (d->gather == 1 && !mok_layer_gather_applies(d)))
        return say(err, err_len, MOK_ERR_ARGUMENT, "gather = %d: 0, -1 (mok_layer_gather_auto), or 1 with dtype "
                   "MOK_LAYER_BF16, dispatch_push 1, train 0, own_first 0 and swap_tail 0 (GEMM1 reads the rows where "
                   "they landed)", d->gather);
    if ((d->fp8_tile_n != 0 && d->fp8_tile_n != 128 && d->fp8_tile_n != 256) ||
        (d->fp8_tile_n == 256 && d->dtype != MOK_LAYER_FP8_BLOCK))
        return say(err, err_len, MOK_ERR_ARGUMENT, "fp8_tile_n = %d: 0 or 128, or 256 with dtype MOK_LAYER_FP8_BLOCK",
                   d->fp8_tile_n);
    if (d->land_stages && (d->land_stages < 2 || d->land_stages > 4 || d->mx_scheme != 1))
        return say(err, err_len, MOK_ERR_ARGUMENT, "land_stages = %d: 0 (as deep as fits), or 2..4 with mx_scheme 1",
                   d->land_stages);
    if (d->stages < 0 || d->stages == 1 || d->stages > 8)
        return say(err, err_len, MOK_ERR_ARGUMENT, "stages = %d: 0 (the deepest that fits) or 2..8", d->stages);
    if ((rc = check_flag("combine_per_rank", d->combine_per_rank, err, err_len)) ||
        (rc = check_flag("dispatch_push", d->dispatch_push, err, err_len)) ||
        (rc = check_flag("send_from_gemm", d->send_from_gemm, err, err_len)) ||
        (rc = check_flag("lockstep", d->lockstep, err, err_len)) ||
        (rc = check_flag("split_half", d->split_half, err, err_len)) ||
        (rc = check_flag("train", d->train, err, err_len)) ||
        (rc = check_flag("act_recompute", d->act_recompute, err, err_len)) ||
        (rc = check_flag("wgrad_mix", d->wgrad_mix, err, err_len)) ||
        (rc = check_flag("wgrad_reduce", d->wgrad_reduce, err, err_len)) ||
        (rc = check_flag("raster", d->raster, err, err_len)))
        return rc;
    return MOK_OK;
}

static struct mok_layer_desc with_defaults(const struct mok_layer_desc *desc)
{
    struct mok_layer_desc d = *desc;
    if (!d.comm_sms)
        d.comm_sms = 16;
    if (!d.chunk_rows)
        d.chunk_rows = 128; /* the best measured on 2 x H200 with send_from_gemm (megakernel-v3 results) */
    if (!d.fp8_tile_n && d.dtype == MOK_LAYER_FP8_BLOCK)
        d.fp8_tile_n = 256; /* 11-13% faster than 128 (results/h200x1/2026-12-05-fp8-wide-swap-ab) */
    return d;
}

/* The kernels' arguments for a checked description (sizes and modes; no pointers yet). */
static int init_args(const struct mok_layer_desc *d, int rank, int nranks, struct mok_lsa_args *a,
                     struct mok_mega_args *mk, char *err, int err_len)
{
    int EL = d->experts / nranks;
    *a = (struct mok_lsa_args){.rank = rank, .nranks = nranks, .experts = d->experts, .local_experts = EL,
                               .topk = d->topk, .t_max = d->max_tokens, .hidden = d->hidden, .tile_rows = 128,
                               .chunk_rows = d->chunk_rows, .combine_per_rank = d->combine_per_rank,
                               .landing = d->dispatch_push, .push = d->dispatch_push,
                               .small_paths = MOK_LSA_SMALL_FUSED};
    a->capacity = mok_schedule_capacity(d->capacity_factor, a->t_max, a->topk, EL, a->tile_rows);
    if (a->capacity < 1)
        return say(err, err_len, MOK_ERR_ARGUMENT, "capacity_factor = %g: gives no capacity for %d tokens x top-%d "
                   "(or more than 2^31 rows)", d->capacity_factor, d->max_tokens, d->topk);
    *mk = (struct mok_mega_args){.lsa = *a, .inter = d->intermediate, .comm_blocks = d->comm_sms,
                                 .combine_blocks = d->combine_sms, .send_from_gemm = d->send_from_gemm,
                                 .stages = d->stages, .raster = d->raster, .lockstep = d->lockstep,
                                 .own_first = d->own_first, .split_half = d->split_half,
                                 .shared_inter = d->shared_intermediate, .fp8 = d->dtype,
                                 .mx_scheme = d->mx_scheme, .swap_tail = d->swap_tail,
                                 .land_stages = d->land_stages, .fp8_tile_n = d->fp8_tile_n,
                                 .push_all = d->push_all,
                                 .gather = d->gather >= 0 ? d->gather : mok_layer_gather_auto(d, nranks)};
    _Static_assert(MOK_LAYER_FP8_BLOCK == 1 && MOK_LAYER_MXFP8 == 2, "mok_mega_args.fp8 takes the dtype's value");
    return MOK_OK;
}

/* mok_layer_check's work, also giving create the rank, the rank count and the description with its defaults. */
static int layer_check(ncclComm_t comm, const struct mok_layer_desc *desc, int *rank, int *nranks,
                       struct mok_layer_desc *resolved, char *err, int err_len)
{
    if (!desc)
        return say(err, err_len, MOK_ERR_ARGUMENT, "desc is NULL");
    if (!comm || ncclCommUserRank(comm, rank) != ncclSuccess || ncclCommCount(comm, nranks) != ncclSuccess)
        return say(err, err_len, MOK_ERR_ARGUMENT, "comm: not a usable NCCL communicator");
    if (*nranks > MOK_LSA_MAX_RANKS)
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "%d ranks: at most %d", *nranks, MOK_LSA_MAX_RANKS);
    int lsa = mok_nccl_lsa_size((void *)comm);
    if (lsa != *nranks)
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "every rank must be in one NVLink (LSA) domain: LSA team %d of "
                   "%d ranks", lsa, *nranks);
    int dev = 0, gpu_sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&gpu_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "cannot query the current CUDA device");
    }
    int rc = check_shape(desc, *nranks, err, err_len);
    if (rc || (rc = check_tuning(desc, gpu_sms, err, err_len)))
        return rc;
    *resolved = with_defaults(desc);
    struct mok_lsa_args a;
    struct mok_mega_args mk;
    if ((rc = init_args(resolved, *rank, *nranks, &a, &mk, err, err_len)))
        return rc;
    mk.shared_inter = 0; /* the shared buffers and weights do not exist yet: check_shape covered its value */
    if (mk.fp8) /* nor do the fp8 buffers: stand-ins for the pointer checks (the kernel is not launched here) */
        mk.xq = mk.hq = (uint8_t *)(uintptr_t)256, mk.hs = mk.xq, mk.w13q = mk.w2q = mk.w13mx = mk.w2mx = mk.xq,
        mk.w13s = mk.w2s = (const float *)(uintptr_t)256, mk.w13 = mk.w2 = (const uint16_t *)(uintptr_t)256;
    char why[256];
    if (!mok_megakernel_supports(&mk, why, sizeof why))
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "megakernel: %s", why);
    struct mok_core_bwd_config core = mok_core_bwd_config(256, 0, 0, 1);
    if (resolved->train && resolved->shared_intermediate &&
        !mok_core_bwd_supports(&core, 1, resolved->hidden, resolved->shared_intermediate, why, sizeof why))
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "the shared experts' backward (mok's GEMM core): %s", why);
    return MOK_OK;
}

int mok_layer_check(ncclComm_t comm, const struct mok_layer_desc *desc, char *err, int err_len)
{
    int rank = 0, nranks = 0;
    struct mok_layer_desc resolved;
    return layer_check(comm, desc, &rank, &nranks, &resolved, err, err_len);
}

int barrier(mok_workspace *ws, cudaStream_t s, char *err, int err_len)
{
    ncclResult_t r = ncclAllReduce(ws->barrier_word, ws->barrier_word, 1, ncclInt32, ncclSum, ws->comm, s);
    if (r != ncclSuccess)
        return say(err, err_len, MOK_ERR_NCCL, "barrier: %s", ncclGetErrorString(r));
    MOK_CHECK(cuda, cudaStreamSynchronize(s), return MOK_ERR_CUDA);
    return MOK_OK;
}

/* The window as mok-bench's lsa implementation lays it out (src/lsa_layout.c), so the same kernels read it. */
static int alloc_window(mok_workspace *ws, char *err, int err_len)
{
    struct mok_lsa_args *a = &ws->a;
    /* train: a dy slot per input slot, after them */
    ws->win_bytes = mok_lsa_layout(a, ws->d.input_slots * (ws->d.train ? 2 : 1));
    ncclResult_t r = ncclMemAlloc(&ws->win_ptr, ws->win_bytes);
    if (r == ncclSuccess)
        r = ncclCommWindowRegister(ws->comm, ws->win_ptr, ws->win_bytes, &ws->window, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess)
        return say(err, err_len, MOK_ERR_NCCL, "symmetric window of %zu bytes: %s", ws->win_bytes,
                   ncclGetErrorString(r));
    a->window = ws->window;
    MOK_CHECK(cuda, cudaMemset(ws->win_ptr, 0, a->off_x), return MOK_ERR_CUDA); /* flags and table start at zero */
    return MOK_OK;
}

/* cudaMalloc, counted in the workspace's device bytes (mok_workspace_bytes). */
static cudaError_t dev_alloc(mok_workspace *ws, void **p, size_t bytes)
{
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess)
        ws->dev_bytes += bytes;
    return e;
}

/* The shared experts' intermediate and output over this rank's own tokens (none without shared experts). */
static int alloc_shared(mok_workspace *ws, char *err, int err_len)
{
    size_t tmax = (size_t)ws->a.t_max, SI = (size_t)ws->mk.shared_inter;
    if (!SI)
        return MOK_OK;
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.sh, tmax * SI * 2 + 16), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.sy, tmax * (size_t)ws->a.hidden * 2 + 16), return MOK_ERR_CUDA);
    return MOK_OK;
}

static int alloc_device(mok_workspace *ws, char *err, int err_len)
{
    struct mok_lsa_args *a = &ws->a;
    size_t routes = (size_t)a->nranks * a->t_max * a->topk, EL = (size_t)a->local_experts, cap = (size_t)a->capacity;
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->epoch, 3 * sizeof(uint64_t)), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, cudaMemset(a->epoch, 0, 3 * sizeof(uint64_t)), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->all_tokens, sizeof(int32_t) * (size_t)a->nranks), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->all_ids, sizeof(int32_t) * routes + 16), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->all_w, sizeof(float) * routes + 16), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->rows, sizeof(int32_t) * EL), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->offset, sizeof(int32_t) * (EL + 1)), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->entry, sizeof(int32_t) * cap), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->route_slot, sizeof(int32_t) * routes + 16), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->block_off, sizeof(int32_t) * (size_t)a->nranks * a->sched_blocks * EL),
              return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->chunk_target, sizeof(int32_t) * (size_t)ws->nchunks),
              return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->ready, sizeof(int32_t) * (size_t)ws->nchunks), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->status, sizeof(int32_t) * 4), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, cudaMemset(a->status, 0, sizeof(int32_t) * 4), return MOK_ERR_CUDA);
    /* GEMM1 reads expert slots in both dispatch modes (push lands rows in the window, then they are copied here):
     * bf16 rows, or FP8 wire rows (e4m3 values and their scales), and then h quantized for GEMM2 */
    if (ws->mk.fp8) {
        const size_t I = (size_t)ws->mk.inter;
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.xq, cap * (size_t)mok_megakernel_fp8_row_bytes(a->hidden) + 16),
                  return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.hq, cap * I + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.hs, cap * (I / 32) + 16), return MOK_ERR_CUDA);
        /* zeros in the rows no route fills (each expert's padding up to 128, the wire rows' last bytes): GEMM1
         * reads them (TMA, and the scales as generic loads) and quantizes their h; no output depends on them, but
         * defined values keep those rows finite and compute-sanitizer's initcheck quiet */
        MOK_CHECK(cuda, cudaMemset(ws->mk.xq, 0, cap * (size_t)mok_megakernel_fp8_row_bytes(a->hidden) + 16),
                  return MOK_ERR_CUDA);
        MOK_CHECK(cuda, cudaMemset(ws->mk.hq, 0, cap * I + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, cudaMemset(ws->mk.hs, 0, cap * (I / 32) + 16), return MOK_ERR_CUDA);
        const int32_t one = 1; /* h stored until mok_workspace_store_h says otherwise */
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->store_h_word, sizeof(int32_t)), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, cudaMemcpy(ws->store_h_word, &one, sizeof one, cudaMemcpyHostToDevice), return MOK_ERR_CUDA);
        ws->mk.store_h = ws->store_h_word;
    } else {
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&a->xin, cap * (size_t)a->hidden * 2 + 16), return MOK_ERR_CUDA);
    }
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.h, cap * (size_t)ws->mk.inter * 2 + 16), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.out, cap * (size_t)a->hidden * 2 + 16), return MOK_ERR_CUDA);
    const size_t counters = mok_megakernel_counters((int)cap, a->t_max, ws->mk.shared_inter) +
                            (ws->mk.fp8 ? mok_megakernel_fp8_counters((int)cap, ws->mk.inter) : 0);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.done, sizeof(int32_t) * counters), return MOK_ERR_CUDA);
    MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->barrier_word, sizeof(int32_t)), return MOK_ERR_CUDA);
    if (ws->d.train) { /* what the forward saves and the backward's intermediates (struct mok_mega_bwd_args) */
        size_t I = (size_t)ws->mk.inter, H = (size_t)a->hidden;
        struct mok_mega_bwd_args *b = &ws->bk;
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.gu, cap * 2 * I * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&b->m.lsa.xin, cap * H * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&b->dgu, cap * 2 * I * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&b->hw, cap * I * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&b->dr_part, cap * (I / 256) * sizeof(float) + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&b->m.done,
                                  sizeof(int32_t) * mok_megakernel_bwd_counters((int)cap, a->t_max)),
                  return MOK_ERR_CUDA);
    }
    if (ws->d.train && ws->mk.shared_inter) {
        size_t SI = (size_t)ws->mk.shared_inter, tm = (size_t)a->t_max, H = (size_t)a->hidden;
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->mk.sgu, tm * 2 * SI * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.dhp, tm * SI * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.dgu, tm * 2 * SI * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.hw, tm * SI * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.dx, tm * H * 2 + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.dr, tm * sizeof(float) + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.ones, tm * sizeof(float) + 16), return MOK_ERR_CUDA);
        MOK_CHECK(cuda, dev_alloc(ws, (void **)&ws->sb.offset, 2 * sizeof(int32_t)), return MOK_ERR_CUDA);
        float *one = malloc(tm * sizeof(float));
        if (!one)
            return say(err, err_len, MOK_ERR_MEMORY, "out of host memory");
        for (size_t i = 0; i < tm; i++)
            one[i] = 1.0f;
        cudaError_t e = cudaMemcpy(ws->sb.ones, one, tm * sizeof(float), cudaMemcpyHostToDevice);
        free(one);
        MOK_CHECK(cuda, e, return MOK_ERR_CUDA);
        /* the core's dgrad and wgrad in 128 x 256 tiles, the weight tile order n-major (raster 1: the faster dgrad
         * on one H200, results/h200x1/2026-12-04-mok-gemm-backward section 5) */
        ws->sb.cfg = mok_core_bwd_config(256, 0, ws->d.shared_sms, 1);
        if (ws->d.shared_sms) { /* backward.c: the shared experts' backward beside the kernel */
            MOK_CHECK(cuda, cudaStreamCreateWithFlags(&ws->sb.side, cudaStreamNonBlocking), return MOK_ERR_CUDA);
            MOK_CHECK(cuda, cudaEventCreateWithFlags(&ws->sb.fork, cudaEventDisableTiming), return MOK_ERR_CUDA);
            MOK_CHECK(cuda, cudaEventCreateWithFlags(&ws->sb.join, cudaEventDisableTiming), return MOK_ERR_CUDA);
        }
    }
    ws->dev_bytes += ws->win_bytes;
    MOK_CHECK(cuda, cudaMemset(ws->barrier_word, 0, sizeof(int32_t)), return MOK_ERR_CUDA);
    a->expert_out = ws->mk.out;
    return alloc_shared(ws, err, err_len);
}

int mok_workspace_create(ncclComm_t comm, const struct mok_layer_desc *desc, cudaStream_t stream,
                         mok_workspace **out, char *err, int err_len)
{
    if (!out)
        return say(err, err_len, MOK_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    int rank = 0, nranks = 0;
    struct mok_layer_desc d;
    int rc = layer_check(comm, desc, &rank, &nranks, &d, err, err_len);
    if (rc)
        return rc;
    mok_workspace *ws = calloc(1, sizeof(*ws));
    if (!ws)
        return say(err, err_len, MOK_ERR_MEMORY, "out of host memory");
    ws->comm = comm;
    ws->d = d;
    ws->store_h = 1;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&ws->gpu_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        free(ws);
        return say(err, err_len, MOK_ERR_CUDA, "cannot query the current CUDA device");
    }
    init_args(&ws->d, rank, nranks, &ws->a, &ws->mk, err, err_len); /* layer_check ran it on the same input */
    ws->nchunks = (ws->a.capacity + ws->a.chunk_rows - 1) / ws->a.chunk_rows;
    if ((rc = alloc_window(ws, err, err_len)) || (rc = alloc_device(ws, err, err_len))) {
        mok_workspace_destroy(ws);
        return rc;
    }
    mok_megakernel_prepare((mok_stream_t)stream); /* its failure record: allocated now, never during a capture */
    /* every window is zeroed before any rank can flag into it: the memsets above ran on the legacy stream and may
     * still be running (cudaMemset returns early), and a non-blocking `stream` would not wait for them */
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
        mok_workspace_destroy(ws);
        return say(err, err_len, MOK_ERR_CUDA, "workspace zeroing: %s", cudaGetErrorString(ce));
    }
    if ((rc = barrier(ws, stream, err, err_len))) {
        mok_workspace_destroy(ws);
        return rc;
    }
    ws->created = 1;
    *out = ws;
    return MOK_OK;
}

void mok_workspace_destroy(mok_workspace *ws)
{
    if (!ws)
        return;
    char err[64];
    cudaDeviceSynchronize();
    if (ws->created) /* peers may read my window until their forward is done (not after a failed create: the
                        other ranks may not be here) */
        barrier(ws, 0, err, sizeof err);
    struct mok_lsa_args *a = &ws->a;
    void *dev[] = {a->epoch, a->all_tokens, a->all_ids, a->all_w, a->rows, a->offset, a->entry, a->route_slot,
                   a->block_off, a->chunk_target, a->ready, a->status, a->xin, ws->mk.h, ws->mk.out, ws->mk.done,
                   ws->mk.sh, ws->mk.sy, ws->barrier_word, ws->mk.gu, ws->bk.m.lsa.xin, ws->bk.dgu, ws->bk.hw,
                   ws->bk.dr_part, ws->bk.m.done, ws->mk.sgu, ws->sb.dhp, ws->sb.dgu, ws->sb.hw, ws->sb.dx, ws->sb.dr,
                   ws->sb.ones, ws->sb.offset, ws->mk.xq, ws->mk.hq, ws->mk.hs, ws->store_h_word};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
    if (ws->sb.fork)
        cudaEventDestroy(ws->sb.fork);
    if (ws->sb.join)
        cudaEventDestroy(ws->sb.join);
    if (ws->sb.side)
        cudaStreamDestroy(ws->sb.side);
    if (ws->window)
        ncclCommWindowDeregister(ws->comm, ws->window);
    if (ws->win_ptr)
        ncclMemFree(ws->win_ptr);
    free(ws);
}

uint16_t *mok_workspace_input(mok_workspace *ws, int slot)
{
    if (!ws || slot < 0 || slot >= ws->d.input_slots)
        return NULL;
    return (uint16_t *)((char *)ws->win_ptr + ws->a.off_x + (size_t)slot * ws->a.x_set_bytes);
}

int out_of_order(const char *call, const char *needs, char *err, int err_len)
{
    return say(err, err_len, MOK_ERR_ORDER, "%s: %s", call, needs);
}

int mok_route(mok_workspace *ws, int slot, int tokens, const int32_t *ids, const float *weights, cudaStream_t stream,
              char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if (slot < 0 || slot >= ws->d.input_slots)
        return say(err, err_len, MOK_ERR_ARGUMENT, "slot = %d: 0..%d (input_slots - 1)", slot, ws->d.input_slots - 1);
    if (tokens < 0 || tokens > ws->a.t_max)
        return say(err, err_len, MOK_ERR_ARGUMENT, "tokens = %d: 0..%d (max_tokens)", tokens, ws->a.t_max);
    if (tokens && (!ids || !weights))
        return say(err, err_len, MOK_ERR_ARGUMENT, "ids and weights: device pointers when tokens = %d > 0", tokens);
    if (ws->step == STEP_BWD_SENT)
        return out_of_order("mok_route", "the backward is not finished (mok_backward_sum comes first)", err, err_len);
    if (ws->step != STEP_IDLE)
        return out_of_order("mok_route", "the previous forward is not finished (mok_forward_kernel and "
                            "mok_forward_sum come first)", err, err_len);
    ws->saved = 0, ws->bwd_dispatched = 0; /* the saved activations belong to the forward being routed now */
    ws->a.set = slot;
    ws->a.my_ids = ids;
    ws->a.my_w = weights;
    ws->a.my_tokens = tokens;
    int rc = mok_lsa_publish(&ws->a, (mok_stream_t)stream);
    if (!rc)
        rc = mok_lsa_schedule(&ws->a, (mok_stream_t)stream);
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "route: %s", cudaGetErrorString((cudaError_t)rc));
    ws->step = STEP_ROUTED;
    return MOK_OK;
}

/* The weights against the description: the routed ones in its dtype (and not the other's), the shared ones
 * exactly when it has shared experts (a mismatch would silently drop or invent them). */
int check_weights(const mok_workspace *ws, const struct mok_weights *w, char *err, int err_len)
{
    if (!w)
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: NULL");
    const int dt = ws->d.dtype;
    const int bf16 = w->w13 && w->w2 && !w->w13_e4m3 && !w->w2_e4m3 && !w->w13_scale && !w->w2_scale &&
                     !w->w13_mx && !w->w2_mx;
    const int e4m3 = !w->w13 && !w->w2 && w->w13_e4m3 && w->w2_e4m3;
    const int mx_bf16 = dt == MOK_LAYER_MXFP8 && ws->d.mx_scheme == 3; /* the MX values in bf16, K permuted */
    if (mx_bf16 && !bf16)
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: dtype MOK_LAYER_MXFP8 with mx_scheme 3 takes w13 and w2 "
                   "(device pointers: the MX values in bf16 from mok_expand_weights_mxfp8) and no e4m3 weights or "
                   "scales");
    if (dt == MOK_LAYER_FP8_BLOCK && !(e4m3 && w->w13_scale && w->w2_scale && !w->w13_mx && !w->w2_mx))
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: dtype MOK_LAYER_FP8_BLOCK takes w13_e4m3, w13_scale, "
                   "w2_e4m3 and w2_scale (device pointers), the other dtypes' fields NULL");
    if (dt == MOK_LAYER_MXFP8 && !mx_bf16 && !(e4m3 && w->w13_mx && w->w2_mx && !w->w13_scale && !w->w2_scale))
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: dtype MOK_LAYER_MXFP8 takes w13_e4m3, w13_mx, w2_e4m3 "
                   "and w2_mx (device pointers), the other dtypes' fields NULL");
    if (dt == MOK_LAYER_BF16 && !bf16)
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: dtype MOK_LAYER_BF16 takes w13 and w2 (device pointers) "
                   "and no e4m3 weights or scales");
    /* the kernel reads them by TMA (16-byte aligned bases) and the block scales as floats */
    const void *tma[] = {w->w13, w->w2, w->w13_e4m3, w->w2_e4m3, w->w13_mx, w->w2_mx};
    const char *names[] = {"w13", "w2", "w13_e4m3", "w2_e4m3", "w13_mx", "w2_mx"};
    for (int i = 0; i < 6; i++)
        if ((uintptr_t)tma[i] % 16)
            return say(err, err_len, MOK_ERR_ARGUMENT, "weights: %s = %p is not 16-byte aligned (the kernel reads it "
                       "by TMA)", names[i], tma[i]);
    if ((uintptr_t)w->w13_scale % 4 || (uintptr_t)w->w2_scale % 4)
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: w13_scale and w2_scale must be 4-byte aligned (fp32)");
    int shared = ws->d.shared_intermediate > 0;
    if (shared && (!w->shared_w13 || !w->shared_w2))
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: shared_w13 and shared_w2 must be given "
                   "(shared_intermediate = %d)", ws->d.shared_intermediate);
    if (!shared && (w->shared_w13 || w->shared_w2))
        return say(err, err_len, MOK_ERR_ARGUMENT, "weights: shared_w13 and shared_w2 must be NULL "
                   "(shared_intermediate = 0: no shared experts)");
    return MOK_OK;
}

/* Whether variant may run now (mok_route before a full or comm-only kernel, rows in the slots for compute-only). */
static int check_variant_order(const mok_workspace *ws, enum mok_variant variant, char *err, int err_len)
{
    if (variant == MOK_VARIANT_COMPUTE_ONLY) {
        if (ws->step != STEP_IDLE)
            return out_of_order("mok_forward_kernel", "variant compute_only between a forward's calls (it runs "
                                "alone, after mok_forward_sum)", err, err_len);
        if (!ws->dispatched)
            return out_of_order("mok_forward_kernel", "variant compute_only computes on the rows a full forward "
                                "dispatched: run one first", err, err_len);
        return MOK_OK;
    }
    if (ws->step != STEP_ROUTED)
        return out_of_order("mok_forward_kernel", "mok_route comes first in every forward", err, err_len);
    if (ws->saved)
        return out_of_order("mok_forward_kernel", "this route's forward already ran (its activations are saved for "
                            "the backward): route again first", err, err_len);
    return MOK_OK;
}

int mok_forward_kernel(mok_workspace *ws, const struct mok_weights *w, enum mok_variant variant,
                       cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if (variant != MOK_VARIANT_FULL && variant != MOK_VARIANT_COMPUTE_ONLY && variant != MOK_VARIANT_COMM_ONLY)
        return say(err, err_len, MOK_ERR_ARGUMENT, "variant = %d: MOK_VARIANT_FULL (0), _COMPUTE_ONLY (1) or "
                   "_COMM_ONLY (2)", (int)variant);
    int rc = check_weights(ws, w, err, err_len);
    if (rc || (rc = check_variant_order(ws, variant, err, err_len)))
        return rc;
    struct mok_mega_args *mk = &ws->mk;
    mk->lsa = ws->a;
    mk->w13 = w->w13, mk->w2 = w->w2;
    mk->w13q = w->w13_e4m3, mk->w2q = w->w2_e4m3, mk->w13s = w->w13_scale, mk->w2s = w->w2_scale;
    mk->w13mx = w->w13_mx, mk->w2mx = w->w2_mx;
    mk->sw13 = w->shared_w13, mk->sw2 = w->shared_w2;
    mk->x_local = mk->shared_inter ? mok_workspace_input(ws, ws->a.set) : NULL; /* the shared experts' tokens */
    _Static_assert(MOK_VARIANT_COMPUTE_ONLY == 1 && MOK_VARIANT_COMM_ONLY == 2, "mok_mega_args.skip values");
    struct mok_mega_args run = *mk;
    run.skip = (int)variant; /* the kernel's skip values are the variants' */
    if (ws->d.act_recompute) /* the backward recomputes gate and up: the forward stores only h and y */
        run.gu = NULL, run.sgu = NULL;
    rc = mok_megakernel_fwd(&run, (mok_stream_t)stream);
    if (rc) {
        char why[256] = "";
        if (!mok_megakernel_supports(mk, why, sizeof why)) /* the arguments it rejected, rather than "invalid value" */
            return say(err, err_len, MOK_ERR_UNSUPPORTED, "forward kernel: megakernel: %s", why);
        return say(err, err_len, MOK_ERR_CUDA, "forward kernel: %s", cudaGetErrorString((cudaError_t)rc));
    }
    if (variant != MOK_VARIANT_COMPUTE_ONLY)
        ws->step = STEP_SENT, ws->dispatched = 1, ws->fwd_full = variant == MOK_VARIANT_FULL;
    return MOK_OK;
}

int mok_forward_sum(mok_workspace *ws, uint16_t *y, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if (!y && ws->a.my_tokens)
        return say(err, err_len, MOK_ERR_ARGUMENT, "y: a device pointer when tokens = %d > 0", ws->a.my_tokens);
    if (ws->step != STEP_SENT)
        return out_of_order("mok_forward_sum", "a full or comm-only mok_forward_kernel after mok_route comes first",
                            err, err_len);
    struct mok_lsa_args r = ws->a;
    r.y = y;
    r.landing = 0; /* own tokens' partials come from the expert outputs, not the landed input rows */
    r.shared_y = ws->mk.shared_inter ? ws->mk.sy : NULL; /* the shared experts' output, added last */
    int rc = mok_lsa_reduce(&r, (mok_stream_t)stream);
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "forward sum: %s", cudaGetErrorString((cudaError_t)rc));
    ws->step = STEP_IDLE;
    ws->saved = ws->d.train && ws->fwd_full;
    return MOK_OK;
}

size_t mok_workspace_bytes(const mok_workspace *ws) { return ws ? ws->dev_bytes : 0; }

int mok_forward(mok_workspace *ws, const struct mok_weights *w, uint16_t *y, cudaStream_t stream, char *err,
                int err_len)
{
    if (ws && !y && ws->a.my_tokens) /* before the kernel: a failed call enqueues nothing */
        return say(err, err_len, MOK_ERR_ARGUMENT, "y: a device pointer when tokens = %d > 0", ws->a.my_tokens);
    int rc = mok_forward_kernel(ws, w, MOK_VARIANT_FULL, stream, err, err_len);
    return rc ? rc : mok_forward_sum(ws, y, stream, err, err_len);
}

int mok_workspace_schedule(const mok_workspace *ws, struct mok_schedule_view *out)
{
    if (!ws || !out)
        return MOK_ERR_ARGUMENT;
    const struct mok_lsa_args *a = &ws->a;
    *out = (struct mok_schedule_view){.local_experts = a->local_experts, .capacity = a->capacity,
                                      .tile_rows = a->tile_rows, .chunk_rows = a->chunk_rows, .chunks = ws->nchunks,
                                      .rows = a->rows, .offset = a->offset, .entry = a->entry,
                                      .chunk_target = a->chunk_target, .ready = a->ready};
    return MOK_OK;
}

int mok_workspace_check(mok_workspace *ws, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    MOK_CHECK(cuda, cudaStreamSynchronize(stream), return MOK_ERR_CUDA);
    int32_t status[4];
    MOK_CHECK(cuda, cudaMemcpy(status, ws->a.status, sizeof status, cudaMemcpyDeviceToHost), return MOK_ERR_CUDA);
    if (status[0])
        return say(err, err_len, MOK_ERR_OVERFLOW, "rank %d: expert %d needs %d rows but the capacity is %d "
                   "(raise capacity_factor = %g)", ws->a.rank, status[1], status[2], status[3],
                   ws->d.capacity_factor);
    return MOK_OK;
}
