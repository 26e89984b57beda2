/* phased_run: a forward made of the report's three phases (dispatch, experts, combine), each enqueued on a stream
 * by the implementation's function; run directly (launch=stream) or replayed from CUDA graphs captured once per
 * (input set, phase) (launch=graph, as a training framework would run it), with slot events between the phases so
 * the phase times mean the same either way (the events stay outside the graphs). Used by lsa, lsa-layer and
 * megakernel. */
#ifndef MOK_IMPL_PHASED_RUN_H
#define MOK_IMPL_PHASED_RUN_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "impl.h"
#include "slot_events.h"

#define PHASED_RUN_PHASES 3 /* dispatch, experts, combine: MOK_PHASE_DISPATCH, _GEMM, _COMBINE */

/* Enqueues phase `phase` of a forward over input set `set` into y on st: the same calls whether launched
 * directly or captured. Returns 0, or -1 with err. A phase with no work enqueues nothing. */
typedef int (*phase_fn)(void *ctx, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len);

struct phased_run {
    phase_fn enqueue;
    void *ctx;
    int sets;
    bool use_graphs;
    cudaGraphExec_t *graphs;  /* [sets][PHASED_RUN_PHASES], NULL until the first run; NULL entries: empty phases */
    const uint16_t *graphs_y; /* the output they were captured for */
    struct mok_slot_events ev; /* marks: start, then one after each phase */
};

/* max_slots: the timed iterations whose phase times are kept. 0, or -1 with err. */
int phased_run_init(struct phased_run *r, phase_fn enqueue, void *ctx, int sets, bool use_graphs, int max_slots,
                    char *err, int err_len);
/* One forward (impl.h's run): captures every set's phases first when graphs are used and y is new. */
int phased_run(struct phased_run *r, int set, uint16_t *y, int slot, cudaStream_t st, char *err, int err_len);
/* impl.h's phase_ms; experts: whether the middle phase has work (comm mode has none: it stays NaN). */
void phased_run_ms(const struct phased_run *r, int slot, bool experts, double out[MOK_NPHASES]);
void phased_run_destroy(struct phased_run *r);

#endif
