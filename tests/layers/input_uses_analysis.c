/* input_uses_analysis.c — not built: test_layers_room hands it to cmake/check_layers.py as
 * if it were a source of the report's input room (ddpprof_report_input), which reads runs
 * and may not use the rooms above it (analysis, output: report/CMakeLists.txt); the check
 * must name that rule for the include of the analysis header below. */
#include "report/input/run.h"
#include "report/analysis/analysis.h"
