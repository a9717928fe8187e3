/* tune.h — `ddpprof tune`: candidate changes to a training configuration measured, not
 * predicted.  Each candidate (a bucket cap, SyncBatchNorm off, threads per rank, AMP, the
 * comm, or a change given with --candidates) runs against the configuration as given in
 * short interleaved A/B trials: every round runs the configuration and each candidate once,
 * in an order rotated from round to round, and each trial's steady-state step time is the
 * median of its steps after the warm-up.  A candidate's change is the median over the
 * rounds of its step time over the configuration's of the same round, its interval the
 * rounds' smallest and largest; it is faster or slower only when every round says so and
 * the change exceeds what the configuration against itself (the "same" trial, always run)
 * moves; otherwise it is noise.  The best measured configuration is printed as a command
 * line; tune.csv holds the table (docs/USAGE.md "ddpprof tune"). */
#ifndef DDPPROF_TUNE_H
#define DDPPROF_TUNE_H

/* `ddpprof tune [training options] [--rounds N] [--tune-steps S] [--candidates LIST]`;
 * argv[1] is "tune".  0, or -1 (error_set) */
int tune_main(int argc, char **argv);

#endif
