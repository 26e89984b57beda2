/* libmok: the workspace and the forward call of include/libmok.h, on the same kernels mok-bench's `megakernel`
 * implementation runs (kernels/lsa_*.cu for routing publish, schedule and the owner's sum, kernels/megakernel_fwd.cu
 * for the fused kernel). No MPI: the only collectives are NCCL's (window registration and one barrier). */
#include "libmok.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lsa_layout.h"
#include "megakernel.h"
#include "mok_kernels.h"
#include "schedule.h"


struct mok_workspace {
    ncclComm_t comm;
    struct mok_layer_desc d;
    void *win_ptr;
    size_t win_bytes;
    ncclWindow_t window;
    int nchunks;
    int32_t *barrier_word; /* device int for the NCCL barrier */
    int created;           /* every rank finished mok_workspace_create: destroy may synchronize with the others */
    struct mok_lsa_args a;
    struct mok_mega_args mk;
};

static int say(char *err, int err_len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int say(char *err, int err_len, int code, const char *fmt, ...)
{
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

#define CU(call)                                                                                                 \
    do {                                                                                                         \
        cudaError_t e_ = (call);                                                                                 \
        if (e_ != cudaSuccess)                                                                                   \
            return say(err, err_len, MOK_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(e_));                     \
    } while (0)

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
    default: return "unknown status";
    }
}

static int check_desc(const struct mok_layer_desc *d, int nranks, char *err, int err_len)
{
    if (!d)
        return say(err, err_len, MOK_ERR_ARGUMENT, "desc is NULL");
    if (d->hidden < 256 || d->hidden % 256)
        return say(err, err_len, MOK_ERR_ARGUMENT, "hidden = %d: a positive multiple of 256", d->hidden);
    if (d->intermediate < 128 || d->intermediate % 128)
        return say(err, err_len, MOK_ERR_ARGUMENT, "intermediate = %d: a positive multiple of 128", d->intermediate);
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
    if (d->comm_sms < 0 || d->chunk_rows < 0 || d->stages < 0 || d->stages > 3 ||
        (d->combine_per_rank != 0 && d->combine_per_rank != 1) || (d->dispatch_push != 0 && d->dispatch_push != 1))
        return say(err, err_len, MOK_ERR_ARGUMENT, "tuning: comm_sms, chunk_rows >= 0, stages 0..3, "
                   "combine_per_rank and dispatch_push 0 or 1");
    return MOK_OK;
}

/* Every rank has reached this point of its stream (a one-int all-reduce), and the host waits for it. */
static int barrier(mok_workspace *ws, cudaStream_t s, char *err, int err_len)
{
    ncclResult_t r = ncclAllReduce(ws->barrier_word, ws->barrier_word, 1, ncclInt32, ncclSum, ws->comm, s);
    if (r != ncclSuccess)
        return say(err, err_len, MOK_ERR_NCCL, "barrier: %s", ncclGetErrorString(r));
    CU(cudaStreamSynchronize(s));
    return MOK_OK;
}

/* The window as mok-bench's lsa implementation lays it out (src/lsa_layout.c), so the same kernels read it. */
static int alloc_window(mok_workspace *ws, char *err, int err_len)
{
    struct mok_lsa_args *a = &ws->a;
    ws->win_bytes = mok_lsa_layout(a, ws->d.input_slots);
    ncclResult_t r = ncclMemAlloc(&ws->win_ptr, ws->win_bytes);
    if (r == ncclSuccess)
        r = ncclCommWindowRegister(ws->comm, ws->win_ptr, ws->win_bytes, &ws->window, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess)
        return say(err, err_len, MOK_ERR_NCCL, "symmetric window of %zu bytes: %s", ws->win_bytes,
                   ncclGetErrorString(r));
    a->window = ws->window;
    CU(cudaMemset(ws->win_ptr, 0, a->off_x)); /* flags and table start at zero */
    return MOK_OK;
}

static int alloc_device(mok_workspace *ws, char *err, int err_len)
{
    struct mok_lsa_args *a = &ws->a;
    size_t routes = (size_t)a->nranks * a->t_max * a->topk, EL = (size_t)a->local_experts, cap = (size_t)a->capacity;
    CU(cudaMalloc((void **)&a->epoch, 3 * sizeof(uint64_t)));
    CU(cudaMemset(a->epoch, 0, 3 * sizeof(uint64_t)));
    CU(cudaMalloc((void **)&a->all_tokens, sizeof(int32_t) * (size_t)a->nranks));
    CU(cudaMalloc((void **)&a->all_ids, sizeof(int32_t) * routes + 16));
    CU(cudaMalloc((void **)&a->all_w, sizeof(float) * routes + 16));
    CU(cudaMalloc((void **)&a->rows, sizeof(int32_t) * EL));
    CU(cudaMalloc((void **)&a->offset, sizeof(int32_t) * (EL + 1)));
    CU(cudaMalloc((void **)&a->entry, sizeof(int32_t) * cap));
    CU(cudaMalloc((void **)&a->route_slot, sizeof(int32_t) * routes + 16));
    CU(cudaMalloc((void **)&a->block_off, sizeof(int32_t) * (size_t)a->nranks * a->sched_blocks * EL));
    CU(cudaMalloc((void **)&a->chunk_target, sizeof(int32_t) * (size_t)ws->nchunks));
    CU(cudaMalloc((void **)&a->ready, sizeof(int32_t) * (size_t)ws->nchunks));
    CU(cudaMalloc((void **)&a->status, sizeof(int32_t) * 4));
    CU(cudaMemset(a->status, 0, sizeof(int32_t) * 4));
    CU(cudaMalloc((void **)&a->xin, cap * (size_t)a->hidden * 2 + 16));
    CU(cudaMalloc((void **)&ws->mk.h, cap * (size_t)ws->mk.inter * 2 + 16));
    CU(cudaMalloc((void **)&ws->mk.out, cap * (size_t)a->hidden * 2 + 16));
    CU(cudaMalloc((void **)&ws->mk.done, sizeof(int32_t) * mok_megakernel_counters((int)cap, a->t_max, 0)));
    CU(cudaMalloc((void **)&ws->barrier_word, sizeof(int32_t)));
    CU(cudaMemset(ws->barrier_word, 0, sizeof(int32_t)));
    a->expert_out = ws->mk.out;
    return MOK_OK;
}

int mok_workspace_create(ncclComm_t comm, const struct mok_layer_desc *desc, cudaStream_t stream,
                         mok_workspace **out, char *err, int err_len)
{
    if (!out)
        return say(err, err_len, MOK_ERR_ARGUMENT, "out is NULL");
    *out = NULL;
    int rank = 0, nranks = 0;
    if (ncclCommUserRank(comm, &rank) != ncclSuccess || ncclCommCount(comm, &nranks) != ncclSuccess)
        return say(err, err_len, MOK_ERR_NCCL, "cannot query the communicator");
    int rc = check_desc(desc, nranks, err, err_len);
    if (rc)
        return rc;
    if (nranks > MOK_LSA_MAX_RANKS)
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "%d ranks: at most %d", nranks, MOK_LSA_MAX_RANKS);
    int lsa = mok_nccl_lsa_size((void *)comm);
    if (lsa != nranks)
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "every rank must be in one NVLink (LSA) domain: LSA team %d of "
                   "%d ranks", lsa, nranks);
    mok_workspace *ws = calloc(1, sizeof(*ws));
    if (!ws)
        return say(err, err_len, MOK_ERR_MEMORY, "out of host memory");
    ws->comm = comm;
    ws->d = *desc;
    struct mok_layer_desc *d = &ws->d;
    if (!d->comm_sms)
        d->comm_sms = 16;
    if (!d->chunk_rows)
        d->chunk_rows = 512;
    int EL = d->experts / nranks;
    struct mok_lsa_args *a = &ws->a;
    *a = (struct mok_lsa_args){.rank = rank, .nranks = nranks, .experts = d->experts, .local_experts = EL,
                               .topk = d->topk, .t_max = d->max_tokens, .hidden = d->hidden, .tile_rows = 128,
                               .chunk_rows = d->chunk_rows, .combine_per_rank = d->combine_per_rank,
                               .landing = d->dispatch_push, .push = d->dispatch_push,
                               .small_paths = MOK_LSA_SMALL_FUSED};
    a->capacity = mok_schedule_capacity(d->capacity_factor, a->t_max, a->topk, EL, a->tile_rows);
    if (a->capacity < 1) {
        free(ws);
        return say(err, err_len, MOK_ERR_ARGUMENT, "capacity_factor %g gives no capacity", desc->capacity_factor);
    }
    ws->nchunks = (a->capacity + a->chunk_rows - 1) / a->chunk_rows;
    ws->mk = (struct mok_mega_args){.inter = d->intermediate, .comm_blocks = d->comm_sms, .stages = d->stages};
    if ((rc = alloc_window(ws, err, err_len)) || (rc = alloc_device(ws, err, err_len))) {
        mok_workspace_destroy(ws);
        return rc;
    }
    ws->mk.lsa = *a;
    char why[256];
    if (!mok_megakernel_supports(&ws->mk, why, sizeof why)) {
        mok_workspace_destroy(ws);
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "megakernel: %s", why);
    }
    mok_megakernel_prepare((mok_stream_t)stream);
    /* every window is zeroed before any rank can flag into it */
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
                   ws->barrier_word};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
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

int mok_route(mok_workspace *ws, int slot, int tokens, const int32_t *ids, const float *weights, cudaStream_t stream,
              char *err, int err_len)
{
    if (!ws || slot < 0 || slot >= ws->d.input_slots)
        return say(err, err_len, MOK_ERR_ARGUMENT, "slot = %d: 0..input_slots - 1", slot);
    if (tokens < 0 || tokens > ws->a.t_max || (tokens && (!ids || !weights)))
        return say(err, err_len, MOK_ERR_ARGUMENT, "tokens = %d: 0..%d, with ids and weights", tokens, ws->a.t_max);
    ws->a.set = slot;
    ws->a.my_ids = ids;
    ws->a.my_w = weights;
    ws->a.my_tokens = tokens;
    int rc = mok_lsa_publish(&ws->a, (mok_stream_t)stream);
    if (!rc)
        rc = mok_lsa_schedule(&ws->a, (mok_stream_t)stream);
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "route: %s", cudaGetErrorString((cudaError_t)rc));
    return MOK_OK;
}

int mok_forward(mok_workspace *ws, const uint16_t *w13, const uint16_t *w2, uint16_t *y, cudaStream_t stream,
                char *err, int err_len)
{
    if (!ws || !w13 || !w2 || (!y && ws->a.my_tokens))
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace, w13, w2 and y must be given");
    ws->a.y = y;
    ws->mk.lsa = ws->a;
    ws->mk.w13 = w13;
    ws->mk.w2 = w2;
    int rc = mok_megakernel_fwd(&ws->mk, (mok_stream_t)stream);
    if (!rc) {
        struct mok_lsa_args r = ws->a;
        r.landing = 0; /* own tokens' partials come from the expert outputs, not the landed input rows */
        rc = mok_lsa_reduce(&r, (mok_stream_t)stream);
    }
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "forward: %s", cudaGetErrorString((cudaError_t)rc));
    return MOK_OK;
}

int mok_workspace_check(mok_workspace *ws, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    CU(cudaStreamSynchronize(stream));
    int32_t status[4];
    CU(cudaMemcpy(status, ws->a.status, sizeof status, cudaMemcpyDeviceToHost));
    if (status[0])
        return say(err, err_len, MOK_ERR_OVERFLOW, "rank %d: expert %d needs %d rows but the capacity is %d "
                   "(raise capacity_factor)", ws->a.rank, status[1], status[2], status[3]);
    return MOK_OK;
}
