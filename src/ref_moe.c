/* ref_moe: the host forward and backward of the MoE layer in double precision (see ref_moe.h). Plain loops: the
 * problems it checks are small, and every sum is in a fixed order. */
#include "ref_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double sigmoid(double g) { return 1.0 / (1.0 + exp(-g)); }

/* One expert MLP on row xr: gate and up [inter] into g, u, h = silu(g) u, and (when o) o = h w2^T [hidden]. */
static void mlp_forward(const double *xr, const double *w13, const double *w2, int hidden, int inter, double *g,
                        double *u, double *h, double *o)
{
    for (int i = 0; i < inter; i++) {
        double sg = 0, su = 0;
        for (int k = 0; k < hidden; k++) {
            sg += xr[k] * w13[(size_t)i * hidden + k];
            su += xr[k] * w13[(size_t)(inter + i) * hidden + k];
        }
        g[i] = sg, u[i] = su;
        h[i] = sg * sigmoid(sg) * su;
    }
    if (!o)
        return;
    for (int c = 0; c < hidden; c++) {
        double s = 0;
        for (int i = 0; i < inter; i++)
            s += h[i] * w2[(size_t)c * inter + i];
        o[c] = s;
    }
}

/* One expert MLP's backward for row xr with output gradient go (already scaled by the route's weight): dx += ...,
 * dw13 += ..., dw2 += ...; returns <dy', h> where dy' = go / scale (the unscaled dh' against h: d_router). */
static double mlp_backward(const double *xr, const double *w13, const double *w2, int hidden, int inter,
                           const double *dyr, double scale, double *dxr, double *dw13, double *dw2, double *scratch)
{
    double *g = scratch, *u = g + inter, *h = u + inter, *dhp = h + inter;
    mlp_forward(xr, w13, w2, hidden, inter, g, u, h, NULL);
    double dr = 0;
    for (int i = 0; i < inter; i++) { /* dh' = dy W2 (unscaled) */
        double s = 0;
        for (int c = 0; c < hidden; c++)
            s += dyr[c] * w2[(size_t)c * inter + i];
        dhp[i] = s;
        dr += s * h[i];
    }
    for (int c = 0; c < hidden; c++) /* dW2 += (w dy)^T h */
        for (int i = 0; i < inter; i++)
            dw2[(size_t)c * inter + i] += scale * dyr[c] * h[i];
    for (int i = 0; i < inter; i++) {
        double s = sigmoid(g[i]), silu = g[i] * s, dsilu = s * (1.0 + g[i] * (1.0 - s));
        double dh = scale * dhp[i], dg = dh * u[i] * dsilu, du = dh * silu;
        for (int k = 0; k < hidden; k++) {
            dxr[k] += dg * w13[(size_t)i * hidden + k] + du * w13[(size_t)(inter + i) * hidden + k];
            dw13[(size_t)i * hidden + k] += dg * xr[k];
            dw13[(size_t)(inter + i) * hidden + k] += du * xr[k];
        }
    }
    return dr;
}

static int valid(const struct mok_ref_moe *m)
{
    if (m->tokens < 0 || m->hidden < 1 || m->inter < 1 || m->experts < 1 || m->topk < 1 || m->shared_inter < 0)
        return 0;
    for (long long r = 0; r < (long long)m->tokens * m->topk; r++)
        if (m->ids[r] < 0 || m->ids[r] >= m->experts)
            return 0;
    return 1;
}

int mok_ref_moe_forward(const struct mok_ref_moe *m, double *y)
{
    if (!valid(m))
        return -1;
    const int H = m->hidden, I = m->inter, S = m->shared_inter, big = I > S ? I : S;
    double *buf = malloc(sizeof(double) * ((size_t)3 * big + H));
    if (!buf)
        return -1;
    double *g = buf, *u = g + big, *h = u + big, *o = h + big;
    for (int t = 0; t < m->tokens; t++) {
        const double *xr = m->x + (size_t)t * H;
        double *yr = y + (size_t)t * H;
        memset(yr, 0, sizeof(double) * (size_t)H);
        for (int j = 0; j < m->topk; j++) { /* slots in order: the fixed-order sum the owner's reduce does */
            int e = m->ids[(size_t)t * m->topk + j];
            double w = m->w[(size_t)t * m->topk + j];
            mlp_forward(xr, m->w13 + (size_t)e * 2 * I * H, m->w2 + (size_t)e * H * I, H, I, g, u, h, o);
            for (int c = 0; c < H; c++)
                yr[c] += w * o[c];
        }
        if (S) {
            mlp_forward(xr, m->sw13, m->sw2, H, S, g, u, h, o);
            for (int c = 0; c < H; c++)
                yr[c] += o[c];
        }
    }
    free(buf);
    return 0;
}

int mok_ref_moe_backward(const struct mok_ref_moe *m, const double *dy, double *dx, double *dw13, double *dw2,
                         double *d_router, double *dsw13, double *dsw2)
{
    if (!valid(m) || (m->shared_inter && (!dsw13 || !dsw2)))
        return -1;
    const int H = m->hidden, I = m->inter, S = m->shared_inter, big = I > S ? I : S;
    double *scratch = malloc(sizeof(double) * (size_t)4 * big);
    if (!scratch)
        return -1;
    for (int t = 0; t < m->tokens; t++) {
        const double *xr = m->x + (size_t)t * H, *dyr = dy + (size_t)t * H;
        double *dxr = dx + (size_t)t * H;
        memset(dxr, 0, sizeof(double) * (size_t)H);
        for (int j = 0; j < m->topk; j++) {
            int e = m->ids[(size_t)t * m->topk + j];
            double w = m->w[(size_t)t * m->topk + j];
            d_router[(size_t)t * m->topk + j] =
                mlp_backward(xr, m->w13 + (size_t)e * 2 * I * H, m->w2 + (size_t)e * H * I, H, I, dyr, w, dxr,
                             dw13 + (size_t)e * 2 * I * H, dw2 + (size_t)e * H * I, scratch);
        }
        if (S)
            mlp_backward(xr, m->sw13, m->sw2, H, S, dyr, 1.0, dxr, dsw13, dsw2, scratch);
    }
    free(scratch);
    return 0;
}
