/* outputs: what a problem asks of an implementation, as a list of named outputs (see below). Pure C: the
 * driver, the checks and the unit tests share it without CUDA. */
#ifndef MOK_OUTPUTS_H
#define MOK_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

/* The outputs a problem asks of an implementation, by name: the forward's y today; the backward adds dx, dw13,
 * dw2 and d_router. Each has the buffer the implementation writes (poisoned before every checked run), its fp32
 * reference on the same inputs, and its own verdict in the report (report.h: <name>_check, <name>_max_rel_err). */
#define MOK_MAX_OUTPUTS 8
/* A host-held reference (ref_host below) goes back to the device in parts of this many elements (128 MiB of fp32:
 * the checker's one scratch buffer, counted in the plan's memory per rank) */
#define MOK_REF_PART_ELEMS ((size_t)32 << 20)
enum mok_out_type { MOK_OUT_BF16 = 0, MOK_OUT_F32 = 1 };
struct mok_output {
    const char *name;      /* one of the report's output names (report.h: MOK_OUTPUT_NAMES) */
    enum mok_out_type type;
    void *data;            /* device, elems of type */
    const float *ref;      /* device fp32 reference, elems; NULL when checks are off or ref_host holds it */
    size_t elems;
    double rtol;           /* error allowed relative to max |ref|; 0: the config's check.rtol */
    /* An accumulated output (fp32 weight gradients under wgrad fp32_accumulate): the implementation adds into it,
     * so before a checked run it gets its seeded start (mok_fill_f32 of init_seed, init_id, init_scale), not
     * poison, and ref holds start + gradient. init_id 0: written, not accumulated. */
    uint64_t init_seed, init_id;
    float init_scale;
    /* A reference too large for a second copy in device memory (the layers' weight gradients: ~45 GB of fp32 at
     * DeepSeek-V3's 256 experts) lives in pinned host memory instead; the check copies it back in parts
     * (check.c) against max |ref| and sum ref^2, taken when the reference was built. */
    const float *ref_host;
    double ref_sq;
    float ref_amax;
};
struct mok_outputs {
    int n;
    struct mok_output o[MOK_MAX_OUTPUTS];
};
/* The output called name, or NULL; the typed lookups return its buffer (NULL when absent or of another type). */
const struct mok_output *mok_output_find(const struct mok_outputs *out, const char *name);
uint16_t *mok_output_bf16(const struct mok_outputs *out, const char *name);
float *mok_output_f32(const struct mok_outputs *out, const char *name);

#endif
