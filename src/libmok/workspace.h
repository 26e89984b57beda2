/* libmok/workspace.h: libmok's workspace and the helpers its two files share (libmok.c: the workspace and the
 * forward; backward.c: the training pass). Private to src/libmok. */
#ifndef MOK_LIBMOK_WORKSPACE_H
#define MOK_LIBMOK_WORKSPACE_H

#include "gemm_mok_bwd.h"
#include "libmok.h"
#include "megakernel.h"
#include "mok_kernels.h"

/* Where the forward (and the backward) stands, so that a call out of order fails before it enqueues anything (a
 * route without its sum would leave the peers' flags one epoch apart; a sum without a kernel would wait for rows
 * never sent). */
enum step { STEP_IDLE = 0, STEP_ROUTED = 1, STEP_SENT = 2, STEP_BWD_SENT = 3 };

struct mok_workspace {
    ncclComm_t comm;
    struct mok_layer_desc d; /* tuning defaults filled in */
    void *win_ptr;
    size_t win_bytes;
    ncclWindow_t window;
    int nchunks;
    int32_t *barrier_word; /* device int for the NCCL barrier */
    int created;           /* every rank finished mok_workspace_create: destroy may synchronize with the others */
    int gpu_sms;           /* the device's SMs (the backward kernel's grid with d.shared_sms) */
    enum step step;
    int dispatched;        /* a full or comm-only kernel has filled the slots: compute-only may run on them */
    int32_t *store_h_word; /* FP8: mk.store_h, the device int mok_workspace_store_h sets (1 after create) */
    int store_h;           /* its value as last enqueued */
    struct mok_lsa_args a;
    struct mok_mega_args mk;
    /* train: the backward's buffers and state */
    struct mok_mega_bwd_args bk; /* dy's slots (bk.m.lsa.xin), gu (mk.gu), dgu, hw, dr_part, done */
    int saved;                   /* a full train forward's sum ran since the last route: its activations are saved */
    int fwd_full;                /* the last forward kernel was MOK_VARIANT_FULL */
    /* train with shared experts: their backward on the GEMM core over this rank's tokens (after the kernel, or with
     * d.shared_sms beside it on the side stream, cfg.sms = d.shared_sms) */
    struct {
        uint16_t *dhp, *dgu, *hw, *dx; /* [t_max][SI], [t_max][2 SI], [t_max][SI], [t_max][H] */
        float *dr, *ones;              /* [t_max]: d_router scratch (no router weight), the weight 1 */
        int32_t *offset;               /* [2]: {0, own tokens}, written before the backward (prologue or side path) */
        struct mok_core_bwd_config cfg;
        cudaStream_t side;             /* d.shared_sms: its stream, and the events that fork it from the caller's */
        cudaEvent_t fork, join;        /* stream and join it back */
    } sb;
    int bwd_dispatched;          /* a full backward ran on them: compute-only may run */
    size_t dev_bytes;            /* device memory held, the window included */
};

/* Shared by libmok.c and backward.c under short names; the symbols carry the libmok_ prefix (a static library's
 * globals meet the caller's). */
#define say libmok_say
#define out_of_order libmok_out_of_order
#define check_weights libmok_check_weights
#define barrier libmok_barrier
/* err := the formatted message (when err_len > 0); returns code. */
int say(char *err, int err_len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* MOK_ERR_ORDER with "call: needs". */
int out_of_order(const char *call, const char *needs, char *err, int err_len);
/* The weights against the description (the shared ones exactly when it has shared experts). */
int check_weights(const mok_workspace *ws, const struct mok_weights *w, char *err, int err_len);
/* Every rank has reached this point of its stream (a one-int all-reduce), and the host waits for it. */
int barrier(mok_workspace *ws, cudaStream_t s, char *err, int err_len);

#endif
