/* charts.h — not built: half of the include cycle test_layers_cycle must name (the report's
 * charts and stepview were one before report/output/svg.h). */
void chart_tick(void);
