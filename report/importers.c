/* importers.c — the table of the report's input formats (see importer.h).  A new format: its
 * file defines `const struct importer importer_NAME`, declared and listed here. */
#include "report/importer.h"

extern const struct importer importer_ddpprof; /* report/import_ddpprof.c */
extern const struct importer importer_legacy;  /* report/import_pytorch.c */
extern const struct importer importer_kineto;  /* report/import_pytorch.c */
extern const struct importer importer_nsys;    /* report/import_nsys.c */

const struct importer *const importers[] = {
    &importer_ddpprof, /* ddpprof run directories (meta.csv, rankN.trace.csv) */
    &importer_legacy,  /* PyTorch's legacy autograd exporter: a JSON array */
    &importer_nsys,    /* Nsight Systems: .nsys-rep (exported by nsys) or its SQLite export;
                          before Kineto, which it beats on a tie (a .nsys-rep with its export
                          beside it, given by name: both claim it maybe) */
    &importer_kineto,  /* PyTorch Kineto JSON (and any file given that nothing else claims) */
};

const size_t importers_count = sizeof importers / sizeof *importers;
