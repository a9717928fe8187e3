/* dist_env.h — the worker side of torchrun's contract: who am I in the job?
 *
 * A worker learns its rank, world size, local rank and rank 0's address from the
 * environment its launcher set: ddpprof's own launcher and torchrun set RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; mpirun (Open MPI) sets
 * OMPI_COMM_WORLD_*; Slurm's srun sets SLURM_*.  MASTER_ADDR and MASTER_PORT always come
 * from the environment (MPI and Slurm do not set them). */
#ifndef DDPPROF_DIST_ENV_H
#define DDPPROF_DIST_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

/* rank 0's host when MASTER_ADDR is unset (and the launcher's default): this machine */
#define DIST_ENV_DEFAULT_ADDR "127.0.0.1"
#define DIST_ENV_DEFAULT_PORT 29500

struct dist_env {
    int rank, world;             /* 0 <= rank < world */
    int local_rank, local_world; /* on this node: 0 <= local_rank < local_world <= world */
    char master_addr[256];       /* rank 0's host (MASTER_ADDR, default 127.0.0.1) */
    int master_port;             /* rank 0's store port (MASTER_PORT, default 29500) */
    const char *source;          /* static: "torchrun", "openmpi", "slurm" or "default" */
    int node_rank;               /* GROUP_RANK (torchrun's node), else -1 */
    int restart_count;           /* TORCHELASTIC_RESTART_COUNT, else 0 */
    int agent_store;             /* TORCHELASTIC_USE_AGENT_STORE=True: MASTER_PORT is the
                                    torchrun agent's TCPStore, not rank 0's (see tcpstore.h) */
    char run_id[128];            /* TORCHELASTIC_RUN_ID unless unset or "none", else "" */
};

/* Fill e from the first of these that is present:
 *   RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE                          ("torchrun")
 *   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE                   ("openmpi")
 *   SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE        ("slurm")
 * and with none of them a single process: rank 0 of world 1 ("default").  Rank and world
 * variables must come in pairs; a missing local rank defaults to the rank and a missing
 * (or, for Slurm, non-numeric like "2(x3)") local world size to the world size.
 * MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500) are read for every source,
 * and torchrun's GROUP_RANK, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_USE_AGENT_STORE and
 * TORCHELASTIC_RUN_ID when set.
 * Returns 0, or -1 with error_set naming the variable (non-numeric, rank >= world,
 * world < 1, port outside 1..65535, ...); e is then unspecified. */
int dist_env_read(struct dist_env *e);

#ifdef __cplusplus
}
#endif
#endif
