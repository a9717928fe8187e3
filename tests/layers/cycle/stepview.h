/* stepview.h — not built: the other half of test_layers_cycle's include cycle. */
void stepview_write(void);
