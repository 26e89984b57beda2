/* test_outputs: a problem's named outputs are found by name and type, and each output's verdict lands in its own
 * report columns (an output without columns is refused). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "outputs.h"
#include "report.h"

#include "check.h"

int main(void)
{
    uint16_t y[4];
    float d_router[4];
    struct mok_outputs out = {2,
                              {{.name = "y", .type = MOK_OUT_BF16, .data = y, .elems = 4},
                               {.name = "d_router", .type = MOK_OUT_F32, .data = d_router, .elems = 4, .rtol = 1e-3}}};
    CHECK(mok_output_find(&out, "y") == &out.o[0] && mok_output_find(&out, "dx") == NULL, "find");
    CHECK(mok_output_bf16(&out, "y") == y && mok_output_f32(&out, "y") == NULL, "y is bf16 only");
    CHECK(mok_output_f32(&out, "d_router") == d_router && mok_output_bf16(&out, "d_router") == NULL, "d_router f32");
    CHECK(mok_output_find(NULL, "y") == NULL, "no list");

    struct mok_row row;
    mok_row_init(&row);
    CHECK(row.y_check[0] == '\0' && isnan(row.y_max_rel_err) && isnan(row.d_router_max_rel_err), "init: empty");
    CHECK(mok_row_set_output(&row, "y", "passed", 0.25) == 0 && !strcmp(row.y_check, "passed") &&
              row.y_max_rel_err == 0.25, "y columns");
    CHECK(mok_row_set_output(&row, "d_router", "incorrect", 2.0) == 0 && !strcmp(row.d_router_check, "incorrect") &&
              row.d_router_max_rel_err == 2.0 && !strcmp(row.y_check, "passed"), "d_router columns, y untouched");
    const char *names[] = MOK_OUTPUT_NAMES;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(mok_row_set_output(&row, names[i], "passed", 0.0) == 0, "%s has columns", names[i]);
    CHECK(mok_row_set_output(&row, "dy", "passed", 0.0) == -1, "an output without columns is refused");
    printf("%s\n", failures ? "test_outputs: FAILED" : "test_outputs: all passed");
    return failures ? 1 : 0;
}
