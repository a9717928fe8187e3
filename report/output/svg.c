/* svg.c — the pictures' shared colours and axis step (see svg.h). */
#include "report/output/svg.h"

#include <math.h>

const char *const seg_colors[SEG_COUNT] = {"#9c9c9c", "#4e79a7", "#f28e2b",
                                           "#59a14f", "#e15759", "#d9d9d9"};

double chart_tick(double max)
{
    if (!(max > 0))
        return 1;
    double raw = max / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
