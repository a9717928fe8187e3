/* cli.h — command-line parsing for `ddpprof train` and `ddpprof worker`.
 *
 * Strict: every number must parse completely and lie in range, every option must be
 * known; a bad one is one error line naming the option, the value and what is allowed. */
#ifndef DDPPROF_CLI_H
#define DDPPROF_CLI_H

#include "train.h"

struct cli {
    struct train_opts train;
    const char *gpu_list;    /* --gpu LIST (NULL: not given) */
    int mode_given;          /* --mode was on the command line */
    int amp_given;           /* --amp was on the command line */
    const char *master_addr; /* --master-addr (launcher) */
    int master_port;         /* --master-port (launcher; 0: pick a free one) */
};

/* Parse argv[first..argc) into c (defaults from train_opts_default first).  0 or -1
 * (error_set).  Strings point into argv. */
int cli_parse(struct cli *c, int argc, char **argv, int first);

/* The usage text. */
const char *cli_usage(void);

/* Strict number parsing, shared by the tools: "'x' is not ..." errors name the option. */
int cli_parse_long(const char *opt, const char *s, long min, long max, long *out);
int cli_parse_double(const char *opt, const char *s, double min, double max, double *out);

#endif
