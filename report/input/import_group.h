/* import_group.h — the runs in one directory of trace files, told apart by their names.
 *
 * scripts/nsys-profile writes one Nsight Systems report per training process into one
 * directory: baseline.rank0.nsys-rep (the single-process baseline) beside ddp.rank0 and
 * ddp.rank1 (the DDP run).  Read as one run they are two rank 0s; read by run they are the
 * main job's two runs, baseline and ddp, as `ddpprof report` reads a main job's OUT/baseline
 * and OUT/ddp.  The rule: when two files of the directory name the same rank ("rankN",
 * "rank_N", "rank-N", "rank.N" in the file name), each file belongs to the run named by its
 * name without the rank and the extensions ("baseline.rank0.nsys-rep" -> "baseline",
 * "ddp_rank1.sqlite" -> "ddp"; or, without "rankN", a name ending in ".N" before its
 * extension, as `nsys profile -o NAME.%q{RANK}` writes: "ddp.1.nsys-rep" -> "ddp", rank 1);
 * otherwise the directory is one run, as before. */
#ifndef DDPPROF_REPORT_IMPORT_GROUP_H
#define DDPPROF_REPORT_IMPORT_GROUP_H

#include <stddef.h>

/* The run of each of paths[0..n) (sorted by name): *group (n entries, caller frees) gets
 * each file's run index, *names (*ngroups names; caller frees each and the array) the runs'
 * names, in the main job's order (baseline, ddp, then by name).  *ngroups is 1 and *names
 * NULL when the directory is one run.  Returns 0, or -1 after error_set() (out of memory;
 * two files of one run naming the same rank: which run each belongs to is unclear). */
int import_group_by_name(char *const *paths, int n, int **group, char ***names, int *ngroups);

/* The file name's rank ("rankN", any case, "_", "-" or "." before N, 0..65535; the last
 * one; the name past the last '/') into *rank, and the run name (what is left without the
 * rank, its separator and the extensions: NUL-terminated, in name[0..cap); name NULL: the
 * rank alone).  1, or 0 when the name holds no rank.  Every importer's rank from a file
 * name. */
int import_group_name_rank(const char *path, char *name, size_t cap, int *rank);

/* The other rank a file name can carry: its name up to the last '.' ends in ".N" (1 to 5
 * digits, N < 65536; `nsys profile -o NAME.%q{RANK}`: "ddp.1.nsys-rep"), into *rank; the
 * run name is the name up to its first '.' (name NULL: the rank alone).  1, or 0.  The
 * grouping's second rule and the Nsight importer's; a PyTorch trace's name ends in
 * ".pt.trace.json" and never matches it ("_N", often a pid, is not read). */
int import_group_dotted_rank(const char *path, char *name, size_t cap, int *rank);

#endif
