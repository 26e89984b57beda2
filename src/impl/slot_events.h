/* slot_events: CUDA events that time the phases of an implementation's timed iterations. Each of `slots` timed
 * iterations has `marks` events recorded on its stream (start, then one after each phase); phase i of a slot is
 * the time between marks i and i + 1, read once the stream has synchronized. */
#ifndef MOK_SLOT_EVENTS_H
#define MOK_SLOT_EVENTS_H

#include <cuda_runtime.h>
#include <stdbool.h>

struct mok_slot_events {
    cudaEvent_t *ev; /* [slots][marks] */
    int slots, marks;
};

/* cudaSuccess, or the first failure (cudaErrorMemoryAllocation when the host is out of memory). */
cudaError_t mok_slot_events_create(struct mok_slot_events *e, int slots, int marks);
/* Is slot one that keeps its events? (-1 and slots past the end are untimed iterations.) */
bool mok_slot_events_timed(const struct mok_slot_events *e, int slot);
cudaError_t mok_slot_events_record(const struct mok_slot_events *e, int slot, int mark, cudaStream_t stream);
/* ms between marks i and i + 1 of slot; false when they cannot be read. */
bool mok_slot_events_ms(const struct mok_slot_events *e, int slot, int i, float *ms);
void mok_slot_events_destroy(struct mok_slot_events *e);

#endif
