/* test_ref_moe: the host MoE reference's backward is the gradient of its forward. With L = sum_t <dy_t, y_t>, every
 * analytic gradient (dx, dW13, dW2, d_router, the shared MLP's dW) matches central differences of the forward in
 * double precision, element by element; accumulation adds to what the weight gradients hold; a bad expert id is
 * refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_moe.h"

#include "check.h"

enum { T = 5, H = 8, I = 4, E = 3, K = 2, S = 4 };
static double x[T * H], w13[E * 2 * I * H], w2[E * H * I], sw13[2 * S * H], sw2[H * S], rw[T * K], dy[T * H];
static int32_t ids[T * K];

static double loss(const struct mok_ref_moe *m)
{
    static double y[T * H];
    if (mok_ref_moe_forward(m, y))
        return NAN;
    double l = 0;
    for (int i = 0; i < T * H; i++)
        l += dy[i] * y[i];
    return l;
}

static double rnd(void) { return (double)rand() / RAND_MAX * 2 - 1; }

/* central difference of loss() in p[i] against the analytic value g */
static int check_grad(const struct mok_ref_moe *m, double *p, int n, const double *g, const char *what)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        double keep = p[i], eps = 1e-6;
        p[i] = keep + eps;
        double lp = loss(m);
        p[i] = keep - eps;
        double lm = loss(m);
        p[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        if (!(fabs(fd - g[i]) <= 1e-6 * (1 + fabs(fd)))) {
            if (bad++ < 3)
                printf("  %s[%d]: analytic %.9g, central difference %.9g\n", what, i, g[i], fd);
        }
    }
    CHECK(bad == 0, "%s: %d of %d gradients off", what, bad, n);
    return bad;
}

int main(void)
{
    srand(11);
    for (int i = 0; i < T * H; i++)
        x[i] = rnd(), dy[i] = rnd();
    for (int i = 0; i < E * 2 * I * H; i++)
        w13[i] = rnd() * 0.7;
    for (int i = 0; i < E * H * I; i++)
        w2[i] = rnd() * 0.7;
    for (int i = 0; i < 2 * S * H; i++)
        sw13[i] = rnd() * 0.5;
    for (int i = 0; i < H * S; i++)
        sw2[i] = rnd() * 0.5;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            ids[t * K + j] = (t + 2 * j) % E; /* every expert gets routes, one token routes twice to one */
            rw[t * K + j] = 0.2 + 0.3 * j + 0.05 * t;
        }
    ids[4 * K + 1] = ids[4 * K]; /* token 4: both slots to the same expert */
    struct mok_ref_moe m = {T, H, I, E, K, S, x, w13, w2, sw13, sw2, ids, rw};
    static double dx[T * H], dw13[E * 2 * I * H], dw2[E * H * I], dr[T * K], dsw13[2 * S * H], dsw2[H * S];
    CHECK(mok_ref_moe_backward(&m, dy, dx, dw13, dw2, dr, dsw13, dsw2) == 0, "backward");
    check_grad(&m, x, T * H, dx, "dx");
    check_grad(&m, w13, E * 2 * I * H, dw13, "dw13");
    check_grad(&m, w2, E * H * I, dw2, "dw2");
    check_grad(&m, rw, T * K, dr, "d_router");
    check_grad(&m, sw13, 2 * S * H, dsw13, "shared dw13");
    check_grad(&m, sw2, H * S, dsw2, "shared dw2");

    /* the weight gradients accumulate (wgrad fp32_accumulate): a second backward adds the same again */
    static double dw2b[E * H * I];
    memcpy(dw2b, dw2, sizeof dw2);
    CHECK(mok_ref_moe_backward(&m, dy, dx, dw13, dw2, dr, dsw13, dsw2) == 0, "second backward");
    int twice = 1;
    for (int i = 0; i < E * H * I; i++)
        twice &= fabs(dw2[i] - 2 * dw2b[i]) <= 1e-12 * (1 + fabs(dw2b[i]));
    CHECK(twice, "dW2 accumulated: not twice the first backward's");

    /* without shared experts the shared gradients are not needed; a bad id is refused */
    m.shared_inter = 0;
    CHECK(mok_ref_moe_backward(&m, dy, dx, dw13, dw2, dr, NULL, NULL) == 0, "no shared experts");
    ids[3] = E;
    static double y[T * H];
    CHECK(mok_ref_moe_forward(&m, y) == -1 && mok_ref_moe_backward(&m, dy, dx, dw13, dw2, dr, NULL, NULL) == -1,
          "expert id out of range refused");
    printf("%s\n", failures ? "test_ref_moe: FAILED" : "test_ref_moe: all passed");
    return failures ? 1 : 0;
}
