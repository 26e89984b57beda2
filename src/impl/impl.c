/* impl: the registry of implementation code, by name (their parameters are in desc.c). */
#include "impl.h"

#include <string.h>

extern const struct mok_impl_ops mok_impl_nccl;
extern const struct mok_impl_ops mok_impl_nccl_overlap;
extern const struct mok_impl_ops mok_impl_lsa;
extern const struct mok_impl_ops mok_impl_nccl_p2p;
extern const struct mok_impl_ops mok_impl_cublas_gemm;
extern const struct mok_impl_ops mok_impl_mok_gemm;
extern const struct mok_impl_ops mok_impl_lsa_layer;
extern const struct mok_impl_ops mok_impl_megakernel;

static const struct mok_impl_ops *const all_impls[] = {&mok_impl_nccl,     &mok_impl_nccl_overlap, &mok_impl_lsa,
                                                       &mok_impl_nccl_p2p, &mok_impl_cublas_gemm,  &mok_impl_mok_gemm,
                                                       &mok_impl_lsa_layer, &mok_impl_megakernel};

const struct mok_impl_ops *mok_impl_find(const char *name)
{
    for (size_t i = 0; i < sizeof(all_impls) / sizeof(all_impls[0]); i++)
        if (strcmp(all_impls[i]->name, name) == 0)
            return all_impls[i];
    return NULL;
}

uint16_t *mok_impl_forward_y(const struct mok_outputs *out, char *err, int err_len)
{
    uint16_t *y = mok_output_bf16(out, "y");
    if (!y)
        snprintf(err, (size_t)err_len, "the problem has no bf16 output y, which a forward writes");
    return y;
}
