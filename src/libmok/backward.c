/* libmok/backward: the training pass of include/libmok.h (desc.train): dy's input slots, the backward kernel
 * (kernels/megakernel/backward.cu; with act_recompute the forward kernel's dispatch and GEMM1 first; the shared
 * experts' backward on the GEMM core after it) and the owner's sum (mok_lsa_grad_sum), in the order the workspace's
 * step (workspace.h) allows. */
#include <stdio.h>
#include <stdlib.h>

#include "check_call.h"
#include "workspace.h"

uint16_t *mok_workspace_grad_input(mok_workspace *ws, int slot)
{
    if (!ws || !ws->d.train || slot < 0 || slot >= ws->d.input_slots)
        return NULL;
    return (uint16_t *)((char *)ws->win_ptr + ws->a.off_x + (size_t)(ws->d.input_slots + slot) * ws->a.x_set_bytes);
}

static int check_grads(const mok_workspace *ws, const struct mok_grads *g, char *err, int err_len)
{
    if (!g)
        return say(err, err_len, MOK_ERR_ARGUMENT, "grads is NULL");
    int f32 = g->dw13_f32 && g->dw2_f32, b16 = g->dw13_bf16 && g->dw2_bf16;
    int any = !!g->dw13_f32 + !!g->dw2_f32 + !!g->dw13_bf16 + !!g->dw2_bf16;
    if (any != 2 || (!f32 && !b16))
        return say(err, err_len, MOK_ERR_ARGUMENT, "grads: dw13_f32 and dw2_f32 (accumulated), or dw13_bf16 and "
                   "dw2_bf16 (written); %d of the four pointers given", any);
    int shared = ws->d.shared_intermediate > 0;
    if (shared != !!g->shared_dw13 || shared != !!g->shared_dw2)
        return say(err, err_len, MOK_ERR_ARGUMENT, "grads: shared_dw13 and shared_dw2 %s (shared_intermediate = %d)",
                   shared ? "must both be given" : "must be NULL", ws->d.shared_intermediate);
    return MOK_OK;
}

/* This rank's routing [tokens][k] as the route gathered it (lsa.all_ids' row of this rank): what the backward's
 * pushes read, so that the caller's ids need to live only until the forward's work is done (libmok.h). */
static const int32_t *routing_copy(const mok_workspace *ws)
{
    return ws->a.all_ids + (size_t)ws->a.rank * ws->a.t_max * ws->a.topk;
}

/* act_recompute: the forward's dispatch again (a new epoch, the ready counters from zero) and its GEMM1 tiles, which
 * store gate and up (and, with shared experts, theirs), in the forward kernel with gemm1_only; the same variant as
 * the backward kernel after it (compute only: no dispatch, on the x rows the last full one left). */
static int recompute(mok_workspace *ws, const struct mok_weights *w, enum mok_variant variant, cudaStream_t stream,
                     char *err, int err_len)
{
    struct mok_mega_args r = ws->mk;
    r.lsa = ws->a;
    r.lsa.my_ids = routing_copy(ws);
    r.w13 = w->w13, r.w2 = w->w2, r.sw13 = w->shared_w13, r.sw2 = w->shared_w2;
    r.x_local = r.shared_inter ? mok_workspace_input(ws, ws->a.set) : NULL;
    r.gemm1_only = 1;
    r.skip = (int)variant;
    int rc = 0;
    if (variant != MOK_VARIANT_COMPUTE_ONLY) { /* it dispatches: a new epoch, the ready counters from zero */
        rc = mok_megakernel_next_epoch(ws->a.epoch, (mok_stream_t)stream);
        if (!rc)
            rc = (int)cudaMemsetAsync(ws->a.ready, 0, sizeof(int32_t) * (size_t)ws->nchunks, stream);
    }
    if (!rc)
        rc = mok_megakernel_fwd(&r, (mok_stream_t)stream);
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "backward's recompute: %s", cudaGetErrorString((cudaError_t)rc));
    return MOK_OK;
}

/* The shared experts' backward over this rank's tokens on the GEMM core (on `stream` after sb.offset = {0, tokens}
 * was written): x and dy are the window's input and dy slots of the routed set. */
static int shared_backward(mok_workspace *ws, const struct mok_weights *w, const struct mok_grads *g,
                           cudaStream_t stream, char *err, int err_len)
{
    int b16 = g->dw13_bf16 != NULL;
    struct mok_expert_bwd eb = {.x = mok_workspace_input(ws, ws->a.set), .dy = mok_workspace_grad_input(ws, ws->a.set),
                                .gu = ws->mk.sgu, .w = ws->sb.ones, .w13 = w->shared_w13, .w2 = w->shared_w2,
                                .dhp = ws->sb.dhp, .dgu = ws->sb.dgu, .hw = ws->sb.hw, .dx = ws->sb.dx,
                                .d_router = ws->sb.dr, .dw13 = g->shared_dw13, .dw2 = g->shared_dw2, .dw_bf16 = b16,
                                .experts = 1};
    char why[256] = "";
    if (mok_core_expert_backward(&ws->sb.cfg, stream, ws->sb.offset, 1, ws->a.t_max, ws->a.hidden,
                                 ws->mk.shared_inter, &eb, why, sizeof why))
        return say(err, err_len, MOK_ERR_CUDA, "shared experts' backward: %s", why);
    return MOK_OK;
}

int mok_backward_kernel(mok_workspace *ws, const struct mok_weights *w, const struct mok_grads *g,
                        enum mok_variant variant, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if (!ws->d.train)
        return say(err, err_len, MOK_ERR_ARGUMENT, "the workspace was created with train = 0: no saved activations");
    if (variant != MOK_VARIANT_FULL && variant != MOK_VARIANT_COMPUTE_ONLY && variant != MOK_VARIANT_COMM_ONLY)
        return say(err, err_len, MOK_ERR_ARGUMENT, "variant = %d: MOK_VARIANT_FULL (0), _COMPUTE_ONLY (1) or "
                   "_COMM_ONLY (2)", (int)variant);
    int rc = check_weights(ws, w, err, err_len);
    if (rc || (rc = check_grads(ws, g, err, err_len)))
        return rc;
    if (ws->step != STEP_IDLE || !ws->saved)
        return out_of_order("mok_backward_kernel", "a train forward's mok_forward_sum comes first, and no backward "
                            "kernel may be left without its mok_backward_sum", err, err_len);
    if (variant == MOK_VARIANT_COMPUTE_ONLY && !ws->bwd_dispatched)
        return out_of_order("mok_backward_kernel", "variant compute_only computes on the dy rows a full backward "
                            "dispatched: run one first", err, err_len);
    if (ws->d.act_recompute && (rc = recompute(ws, w, variant, stream, err, err_len)))
        return rc;
    /* act_recompute with peers: the recompute's scatter reads x from this rank's landing rows, where the backward's
     * push writes the peers' dy rows. A stream-ordered one-int all-reduce between the two kernels keeps every push
     * behind every rank's recompute (act save needs none: the forward's sum waited for every peer's done flags,
     * which its kernel raises after its scatter). */
    if (ws->d.act_recompute && ws->a.nranks > 1 && variant != MOK_VARIANT_COMPUTE_ONLY) {
        ncclResult_t r = ncclAllReduce(ws->barrier_word, ws->barrier_word, 1, ncclInt32, ncclSum, ws->comm, stream);
        if (r != ncclSuccess)
            return say(err, err_len, MOK_ERR_NCCL, "backward's recompute barrier: %s", ncclGetErrorString(r));
    }
    /* d.shared_sms: the shared experts' backward forks onto the side stream (it reads x, dy and the saved gate/up,
     * all written before this call on `stream`) and runs on sb.cfg.sms CTAs beside the kernel, which keeps the
     * other SMs; `stream` joins it before returning, on every path once forked, so the call stays stream-ordered
     * and a capture never ends with the side stream unjoined */
    const int beside = ws->mk.shared_inter && ws->d.shared_sms && variant != MOK_VARIANT_COMM_ONLY;
    struct mok_mega_bwd_args b = ws->bk;
    uint16_t *dy_slots = b.m.lsa.xin;
    int32_t *done = b.m.done;
    b.m = ws->mk;                       /* the forward's shapes, tuning and weights' places */
    b.m.lsa = ws->a;                    /* its schedule */
    b.m.lsa.my_ids = routing_copy(ws);  /* the push's destinations, from the route's copy */
    b.m.lsa.set = ws->d.input_slots + ws->a.set; /* dy's slot in the window: the routed input slot's */
    b.m.lsa.xin = dy_slots;
    b.m.done = done;
    b.m.w13 = w->w13, b.m.w2 = w->w2;
    b.m.skip = (int)variant;
    b.m.out = ws->mk.out;               /* compute only: dx rows stay here */
    b.x = ws->a.xin, b.gu = ws->mk.gu;
    b.dw13_f32 = g->dw13_f32, b.dw2_f32 = g->dw2_f32, b.dw13_bf16 = g->dw13_bf16, b.dw2_bf16 = g->dw2_bf16;
    b.m.shared_inter = 0; /* the kernel's forward field; its shared experts are b.sh */
    const int inside = ws->mk.shared_inter && ws->d.shared_units;
    if (inside) /* their units in the kernel, on the own rows of x and dy in the window */
        b.sh = (struct mok_mega_bwd_shared){.inter = ws->mk.shared_inter, .tokens = ws->a.my_tokens,
                                            .x = mok_workspace_input(ws, ws->a.set),
                                            .dy = mok_workspace_grad_input(ws, ws->a.set), .gu = ws->mk.sgu,
                                            .w13 = w->shared_w13, .w2 = w->shared_w2, .dgu = ws->sb.dgu,
                                            .hw = ws->sb.hw, .dx = ws->sb.dx,
                                            .dw13_f32 = g->dw13_f32 ? (float *)g->shared_dw13 : NULL,
                                            .dw2_f32 = g->dw2_f32 ? (float *)g->shared_dw2 : NULL,
                                            .dw13_bf16 = g->dw13_bf16 ? (uint16_t *)g->shared_dw13 : NULL,
                                            .dw2_bf16 = g->dw2_bf16 ? (uint16_t *)g->shared_dw2 : NULL};
    /* else: the shared experts follow the kernel (shared_backward) or run beside it */
    b.own_offset = ws->mk.shared_inter && !beside && !inside ? ws->sb.offset : NULL;
    b.own_tokens = ws->a.my_tokens;
    b.wgrad_mix = ws->d.wgrad_mix;
    b.wgrad_reduce = g->dw13_f32 ? ws->d.wgrad_reduce : 0;
    b.ctas = beside ? ws->gpu_sms - ws->d.shared_sms : 0;
    char why[256] = "";
    if (beside && !mok_megakernel_bwd_supports(&b, why, sizeof why)) /* before the fork: no refusal after it */
        return say(err, err_len, MOK_ERR_UNSUPPORTED, "backward kernel: %s", why);
    if (beside) {
        cudaError_t e = (cudaError_t)mok_megakernel_bwd_own_offset(ws->sb.offset, ws->a.my_tokens,
                                                                   (mok_stream_t)stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(ws->sb.fork, stream);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(ws->sb.side, ws->sb.fork, 0);
        if (e != cudaSuccess)
            return say(err, err_len, MOK_ERR_CUDA, "shared experts' fork: %s", cudaGetErrorString(e));
        rc = shared_backward(ws, w, g, ws->sb.side, err, err_len);
        /* joined whatever happened: the side stream's recorded work ends before `stream` goes on */
        e = cudaEventRecord(ws->sb.join, ws->sb.side);
        if (e != cudaSuccess && !rc)
            rc = say(err, err_len, MOK_ERR_CUDA, "shared experts' join: %s", cudaGetErrorString(e));
        if (rc) {
            if (e == cudaSuccess)
                cudaStreamWaitEvent(stream, ws->sb.join, 0);
            return rc;
        }
    }
    rc = mok_megakernel_bwd(&b, (mok_stream_t)stream);
    if (beside) { /* the caller's stream goes on once the shared experts' backward is done too */
        cudaError_t e = cudaStreamWaitEvent(stream, ws->sb.join, 0);
        if (!rc)
            rc = (int)e;
    }
    if (rc) {
        if (!beside && !mok_megakernel_bwd_supports(&b, why, sizeof why))
            return say(err, err_len, MOK_ERR_UNSUPPORTED, "backward kernel: %s", why);
        return say(err, err_len, MOK_ERR_CUDA, "backward kernel: %s", cudaGetErrorString((cudaError_t)rc));
    }
    if (ws->mk.shared_inter && variant != MOK_VARIANT_COMM_ONLY && !beside && !inside &&
        (rc = shared_backward(ws, w, g, stream, err, err_len)))
        return rc;
    if (variant != MOK_VARIANT_COMPUTE_ONLY) /* it sent: its sum comes next */
        ws->step = STEP_BWD_SENT, ws->bwd_dispatched = 1;
    return MOK_OK;
}

int mok_backward_sum(mok_workspace *ws, uint16_t *dx, float *d_router, cudaStream_t stream, char *err, int err_len)
{
    if (!ws)
        return say(err, err_len, MOK_ERR_ARGUMENT, "workspace is NULL");
    if ((!dx || !d_router) && ws->a.my_tokens)
        return say(err, err_len, MOK_ERR_ARGUMENT, "dx and d_router: device pointers when tokens = %d > 0",
                   ws->a.my_tokens);
    if (ws->step != STEP_BWD_SENT)
        return out_of_order("mok_backward_sum", "a full mok_backward_kernel comes first", err, err_len);
    struct mok_lsa_args r = ws->a;
    r.y = dx;
    r.d_router = d_router;
    r.shared_y = ws->mk.shared_inter ? ws->sb.dx : NULL; /* the shared experts' dx, added last */
    int rc = mok_lsa_grad_sum(&r, (mok_stream_t)stream);
    if (rc)
        return say(err, err_len, MOK_ERR_CUDA, "backward sum: %s", cudaGetErrorString((cudaError_t)rc));
    ws->step = STEP_IDLE;
    return MOK_OK;
}

int mok_backward(mok_workspace *ws, const struct mok_weights *w, const struct mok_grads *g, uint16_t *dx,
                 float *d_router, cudaStream_t stream, char *err, int err_len)
{
    if (ws && (!dx || !d_router) && ws->a.my_tokens)
        return say(err, err_len, MOK_ERR_ARGUMENT, "dx and d_router: device pointers when tokens = %d > 0",
                   ws->a.my_tokens);
    int rc = mok_backward_kernel(ws, w, g, MOK_VARIANT_FULL, stream, err, err_len);
    return rc ? rc : mok_backward_sum(ws, dx, d_router, stream, err, err_len);
}
