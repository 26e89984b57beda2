/* slot_events: see slot_events.h. */
#include "slot_events.h"

#include <stdlib.h>

cudaError_t mok_slot_events_create(struct mok_slot_events *e, int slots, int marks)
{
    e->slots = slots;
    e->marks = marks;
    e->ev = calloc((size_t)slots * marks + 1, sizeof(cudaEvent_t));
    if (!e->ev)
        return cudaErrorMemoryAllocation;
    for (int i = 0; i < slots * marks; i++) {
        cudaError_t ce = cudaEventCreate(&e->ev[i]);
        if (ce != cudaSuccess)
            return ce;
    }
    return cudaSuccess;
}

bool mok_slot_events_timed(const struct mok_slot_events *e, int slot) { return slot >= 0 && slot < e->slots; }

cudaError_t mok_slot_events_record(const struct mok_slot_events *e, int slot, int mark, cudaStream_t stream)
{
    return cudaEventRecord(e->ev[slot * e->marks + mark], stream);
}

bool mok_slot_events_ms(const struct mok_slot_events *e, int slot, int i, float *ms)
{
    if (!mok_slot_events_timed(e, slot) || i < 0 || i + 1 >= e->marks)
        return false;
    return cudaEventElapsedTime(ms, e->ev[slot * e->marks + i], e->ev[slot * e->marks + i + 1]) == cudaSuccess;
}

void mok_slot_events_destroy(struct mok_slot_events *e)
{
    for (int i = 0; e->ev && i < e->slots * e->marks; i++)
        if (e->ev[i])
            cudaEventDestroy(e->ev[i]);
    free(e->ev);
    e->ev = NULL;
}
