/* charts.c — not built (test_layers_cycle): draws the steps, so it includes stepview.h. */
#include "charts.h"
#include "stepview.h"
