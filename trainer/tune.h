/* tune.h — `ddpprof tune`: candidate changes to a training configuration measured, not
 * predicted.  Each candidate (a bucket cap, SyncBatchNorm off, threads per rank, AMP, the
 * comm, or a change given with --candidates) runs against the configuration as given in
 * short interleaved A/B trials: every round runs the configuration and each candidate once,
 * in an order rotated from round to round, and each trial's steady-state step time is the
 * median of its steps after the warm-up.  A candidate's change is the median over the
 * rounds of its step time over the configuration's of the same round, its interval the
 * rounds' smallest and largest; it is faster or slower only when every round says so and
 * the change exceeds what the configuration against itself (the "same" trial, always run)
 * moves; otherwise it is noise.  When two or more candidates are faster and set nothing in
 * common (tune_compatible), their combination (greedy, best first) runs in rounds of its
 * own against the best single one and the given configuration, and is the pick only when
 * it is faster than the best single one beyond the noise.  The best measured configuration
 * is printed as a command line; tune.csv holds the table (docs/USAGE.md "ddpprof tune"). */
#ifndef DDPPROF_TUNE_H
#define DDPPROF_TUNE_H

/* `ddpprof tune [training options] [--rounds N] [--tune-steps S] [--candidates LIST]`;
 * argv[1] is "tune".  0, or -1 (error_set) */
int tune_main(int argc, char **argv);

/* Whether two candidates' changes (ARGS as --candidates spells them: NAME=VALUE environment
 * words, then train's option words) may be combined: 1 when they set nothing in common --
 * no option of one sets a setting an option of the other sets (whatever the values; an
 * option's spellings are one setting: cli_option_field), no environment variable is in
 * both, and no word that is no option of train's is in both -- 0 when they clash, -1
 * (error_set) when out of memory or a change has too many words. */
int tune_compatible(const char *a, const char *b);

#endif
