/* impl: the registry of implementation code, by name (their parameters are in desc.c). */
#include "impl.h"

#include <string.h>

#include "gemm_cublas.h" /* struct mok_expert_bwd */

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

int mok_impl_gemm_bwd_operands(const struct mok_problem *p, int set, const uint16_t *gu, uint16_t *dhp, uint16_t *dgu,
                               uint16_t *hw, const struct mok_outputs *out, const char *who, struct mok_expert_bwd *b,
                               char *err, int err_len)
{
    const int dw_bf16 = p->spec.wgrad == MOK_WGRAD_BF16;
    const struct mok_output *dw13 = mok_output_find(out, "dw13"), *dw2 = mok_output_find(out, "dw2");
    const enum mok_out_type dw_type = dw_bf16 ? MOK_OUT_BF16 : MOK_OUT_F32;
    *b = (struct mok_expert_bwd){.x = p->gemm_a[set], .dy = p->bwd.dy, .gu = gu, .w = p->bwd.w, .w13 = p->w13[set],
                                 .w2 = p->w2[set], .dhp = dhp, .dgu = dgu, .hw = hw, .dx = mok_output_bf16(out, "dx"),
                                 .d_router = mok_output_f32(out, "d_router"),
                                 .dw13 = dw13 && dw13->type == dw_type ? dw13->data : NULL,
                                 .dw2 = dw2 && dw2->type == dw_type ? dw2->data : NULL, .dw_bf16 = dw_bf16,
                                 .experts = p->local_experts};
    if (!b->dx || !b->d_router || !b->dw13 || !b->dw2) {
        snprintf(err, (size_t)err_len, "%s backward: the problem lacks dx, d_router, or dw13 or dw2 of wgrad %s's type",
                 who, mok_wgrad_name(p->spec.wgrad));
        return -1;
    }
    return 0;
}
