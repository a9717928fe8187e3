/* report_uses_trainer.c — not built: test_layers_rule hands it to cmake/check_layers.py as
 * if it were a source of the report's input room, which may use common and the trace and
 * run formats only; the check must name that rule for the include of the trainer's header
 * below. */
#include "common/error.h"
#include "probes/trace_format.h"
#include "train.h"
