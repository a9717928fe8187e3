/* stepview.c — not built (test_layers_cycle): takes chart_tick from charts.h, which closes
 * the cycle charts -> stepview -> charts. */
#include "stepview.h"
#include "charts.h"
