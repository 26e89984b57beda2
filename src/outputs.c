/* outputs: lookups in a problem's list of outputs (see outputs.h). */
#include "outputs.h"

#include <string.h>

const struct mok_output *mok_output_find(const struct mok_outputs *out, const char *name)
{
    for (int i = 0; out && i < out->n; i++)
        if (!strcmp(out->o[i].name, name))
            return &out->o[i];
    return NULL;
}

uint16_t *mok_output_bf16(const struct mok_outputs *out, const char *name)
{
    const struct mok_output *o = mok_output_find(out, name);
    return o && o->type == MOK_OUT_BF16 ? (uint16_t *)o->data : NULL;
}

float *mok_output_f32(const struct mok_outputs *out, const char *name)
{
    const struct mok_output *o = mok_output_find(out, name);
    return o && o->type == MOK_OUT_F32 ? (float *)o->data : NULL;
}
