/* sm90_diag: the host side of the GEMM core's failure record (kernels/common/sm90_ptx.cuh mok_sm90_fail): where a
 * kernel that gave up on a wait writes who waited on what, and the messages that say it. Used by every kernel on
 * the core (the grouped GEMM, wgrad, the megakernel's forward and backward) through mok_sm90::diag_record, and
 * printed by mok_sm90::diag_print: at exit, and by the grouped GEMM's next launch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.cuh"
#include "gemm/sm90_core.cuh"
#include "common/sm90_ptx.cuh"

namespace {

/* The failure record (mok_sm90_fail): mapped, pinned host memory, one per process, allocated on the first
 * launch that is not being captured into a graph (an allocation during a global-mode capture would invalidate
 * it). Printed at exit, and by the next launch if there is one: the fault leaves the context unusable, but host
 * memory stays readable. */
struct mok_sm90_diag *g_diag = nullptr, *g_diag_dev = nullptr;
bool g_diag_tried = false;

void print_record()
{
    volatile struct mok_sm90_diag *d = g_diag;
    if (!d || d->magic != MOK_SM90_DIAG_MAGIC)
        return;
    if (d->role == MOK_SM90_DIAG_READY)
        fprintf(stderr, "mok-bench: gemm_sm90 stopped: block %d waited ~10 s for the rows of tile %d: ready chunk %d "
                "counter %d, target %d (the dispatch never delivered them)\n", d->block, d->tile, d->slot, d->kb,
                d->extra);
    else if (d->role == MOK_SM90_DIAG_WAVE)
        fprintf(stderr, "mok-bench: gemm_sm90 stopped: block %d waited ~10 s at lockstep barrier %d: %d "
                "arrivals of %d (a CTA is not resident: grid larger than the SMs free for it)\n", d->block, d->tile,
                d->kb, d->extra);
    else if (d->role == MOK_SM90_DIAG_MEGA)
        fprintf(stderr, "mok-bench: megakernel stopped: block %d thread %d waited ~10 s for %s[%d] >= %d, saw %d\n",
                d->block, d->thread,
                d->slot == 0   ? "GEMM1 tiles done (row block)"
                : d->slot == 1 ? "GEMM2 tiles done (row block)"
                : d->slot == 2 ? "the landed flag of rank"
                : d->slot == 3 ? "shared GEMM1 tiles done (row block)"
                : d->slot == 4 ? "units started (lockstep) before unit"
                : d->slot == 5 ? "backward: GEMM2-dgrad tiles done, for GEMM1 dgrad (row block)"
                : d->slot == 6 ? "backward: GEMM2-dgrad tiles done, for a weight gradient (row block)"
                : d->slot == 7 ? "backward: shared experts' GEMM2-dgrad tiles done, for their GEMM1 dgrad (row block)"
                               : "backward: shared experts' GEMM2-dgrad tiles done, for their weight gradients (row "
                                 "block)",
                d->tile, d->extra, d->kb);
    else if (d->role == MOK_SM90_DIAG_LANDING)
        fprintf(stderr, "mok-bench: gemm_sm90 stopped: block %d thread %d (mxfp8 scheme (b) producer) waited ~10 s on "
                "landing stage %d for the phase of parity %d (tile %d, k block %d): its TMA bytes never all arrived "
                "(expect_tx vs boxes, tensor maps), or in the megakernel (tile -1) its loader, thread 0, still waits "
                "for a unit's inputs (its own record, if it timed out too, names them)\n", d->block, d->thread,
                d->slot, d->parity, d->tile, d->kb);
    else if (d->role == MOK_SM90_DIAG_OFFSETS)
        fprintf(stderr, "mok-bench: gemm_sm90 stopped: block %d found offset[%d] = %d, offset[%d] = %d: offsets must "
                "rise from >= 0 to <= rows_capacity\n", d->block, d->tile, d->kb, d->tile + 1, d->extra);
    else {
        bool producer = d->role == MOK_SM90_DIAG_PRODUCER;
        const char *who = producer ? "producer" : d->role == MOK_SM90_DIAG_CONSUMER ? "consumer wg 1" : "consumer wg 2";
        const char *hint = producer ? "the consumers never gave the slot back"
                                    : "the TMA bytes never all arrived (expect_tx vs boxes, tensor map), or, mxfp8 "
                                      "scheme (b), not every producer thread arrived";
        fprintf(stderr, "mok-bench: gemm_sm90 stopped: block %d thread %d (%s) waited ~10 s on the %s barrier of "
                "slot %d for the phase of parity %d (tile %d, k block %d): %s\n", d->block, d->thread, who,
                producer ? "empty" : "full", d->slot, d->parity, d->tile, d->kb, hint);
    }
    fflush(stderr);
    d->magic = 0;
}

struct mok_sm90_diag *record(cudaStream_t s)
{
    if (g_diag_tried)
        return g_diag_dev;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return nullptr; /* try again on a later, uncaptured launch */
    }
    g_diag_tried = true;
    void *h = nullptr, *dptr = nullptr;
    if (cudaHostAlloc(&h, sizeof(struct mok_sm90_diag), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess ||
        cudaHostGetDevicePointer(&dptr, h, 0) != cudaSuccess) {
        cudaGetLastError();
        return nullptr; /* the kernel then stops without a record */
    }
    memset(h, 0, sizeof(struct mok_sm90_diag));
    g_diag = static_cast<struct mok_sm90_diag *>(h);
    g_diag_dev = static_cast<struct mok_sm90_diag *>(dptr);
    atexit(print_record);
    return g_diag_dev;
}

} // namespace

struct mok_sm90_diag *mok_sm90::diag_record(cudaStream_t s) { return record(s); }

void mok_sm90::diag_print() { print_record(); }
