/* importers.c — the table of the report's input formats (see importer.h), and which of them
 * reads a path.  A new format: its file defines `const struct importer importer_NAME`,
 * declared and listed here. */
#include "report/input/importer.h"

extern const struct importer importer_ddpprof; /* report/input/import_ddpprof.c */
extern const struct importer importer_legacy;  /* report/input/import_pytorch.c */
extern const struct importer importer_kineto;  /* report/input/import_pytorch.c */
extern const struct importer importer_nsys;    /* report/input/import_nsys.c */

const struct importer *const importers[] = {
    &importer_ddpprof, /* ddpprof run directories (meta.csv, rankN.trace.csv) */
    &importer_legacy,  /* PyTorch's legacy autograd exporter: a JSON array */
    &importer_nsys,    /* Nsight Systems: .nsys-rep (exported by nsys) or its SQLite export;
                          before Kineto, which it beats on a tie (a .nsys-rep with its export
                          beside it, given by name: both claim it maybe) */
    &importer_kineto,  /* PyTorch Kineto JSON (and any file given that nothing else claims) */
};

const size_t importers_count = sizeof importers / sizeof *importers;

const struct importer *importer_for(const char *path, int is_dir, enum import_claim *level)
{
    const struct importer *best = NULL;
    *level = IMPORT_CLAIM_NO;
    for (size_t i = 0; i < importers_count; i++) {
        enum import_claim c = importers[i]->claims(path, is_dir);
        if (c > *level) {
            *level = c;
            best = importers[i];
        }
    }
    return best;
}
