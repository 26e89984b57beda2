/* megakernel/group_search.cuh: which group holds item `local` of a list where group g's items start at
 * start(g) * per (start: a prefix over the groups, empty groups repeating the same value), on the device (the
 * forward's and the backward's unit lists) and on the host (tests/test_bwd_units.cu checks the backward's list). */
#pragma once

#ifdef __CUDACC__
#define MOK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MOK_HOST_DEVICE inline
#endif

/* The largest g with start(g) * per <= local (a binary search over the groups). */
template <typename Start> MOK_HOST_DEVICE int mok_group_of(int local, Start start, int groups, int per)
{
    int lo = 0, hi = groups - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (start(mid) * per <= local)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
