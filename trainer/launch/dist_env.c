/* dist_env.c — read rank, world and rank 0's address from the launcher's environment
 * (see dist_env.h). */
#include "launch/dist_env.h"

#include "common/error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The variable names one launcher sets. */
struct dist_env_names {
    const char *source;
    const char *rank, *world, *local_rank, *local_world;
    int lenient_local_world; /* Slurm's per-node count may be "2(x3)": fall back to world */
};

static const struct dist_env_names dist_env_sources[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", 0},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", 0},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", 1},
};

static const char *dist_env_get(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Strict parse of a non-negative decimal int: digits only (surrounding blanks allowed). */
static int dist_env_parse(const char *text, int *out)
{
    while (*text == ' ' || *text == '\t')
        text++;
    if (*text < '0' || *text > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (errno || *end != '\0' || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int dist_env_int(const char *name, int *out)
{
    const char *v = dist_env_get(name);
    if (dist_env_parse(v, out) < 0)
        return error_set("dist_env: %s='%s' is not a non-negative integer (check how the "
                         "worker was launched)",
                         name, v);
    return 0;
}

static int dist_env_read_ranks(struct dist_env *e, const struct dist_env_names *n)
{
    if (!dist_env_get(n->rank) || !dist_env_get(n->world))
        return error_set("dist_env: %s is set but %s is not (a launcher sets both)",
                         dist_env_get(n->rank) ? n->rank : n->world,
                         dist_env_get(n->rank) ? n->world : n->rank);
    if (dist_env_int(n->world, &e->world) < 0 || dist_env_int(n->rank, &e->rank) < 0)
        return -1;
    if (e->world < 1)
        return error_set("dist_env: %s=%d must be at least 1", n->world, e->world);
    if (e->rank >= e->world)
        return error_set("dist_env: %s=%d is not below %s=%d (ranks count from 0)", n->rank,
                         e->rank, n->world, e->world);

    e->local_world = e->world;
    const char *lw = dist_env_get(n->local_world);
    if (lw && dist_env_parse(lw, &e->local_world) < 0) {
        if (!n->lenient_local_world)
            return dist_env_int(n->local_world, &e->local_world);
        e->local_world = e->world;
    }
    if (e->local_world < 1 || e->local_world > e->world)
        return error_set("dist_env: %s=%d must be in 1..%s=%d", n->local_world, e->local_world,
                         n->world, e->world);

    e->local_rank = e->rank;
    if (dist_env_get(n->local_rank) && dist_env_int(n->local_rank, &e->local_rank) < 0)
        return -1;
    if (e->local_rank >= e->local_world)
        return error_set("dist_env: %s=%d is not below the local world size %d (%s)", n->local_rank,
                         e->local_rank, e->local_world, lw ? n->local_world : n->world);
    return 0;
}

int dist_env_read(struct dist_env *e)
{
    memset(e, 0, sizeof *e);
    e->world = e->local_world = 1;
    e->source = "default";
    for (size_t i = 0; i < sizeof dist_env_sources / sizeof dist_env_sources[0]; i++) {
        const struct dist_env_names *n = &dist_env_sources[i];
        if (dist_env_get(n->rank) || dist_env_get(n->world)) {
            e->source = n->source;
            if (dist_env_read_ranks(e, n) < 0)
                return -1;
            break;
        }
    }

    const char *addr = dist_env_get("MASTER_ADDR");
    if (!addr)
        addr = DIST_ENV_DEFAULT_ADDR;
    if (strlen(addr) >= sizeof e->master_addr)
        return error_set("dist_env: MASTER_ADDR is %zu characters long, more than %zu",
                         strlen(addr), sizeof e->master_addr - 1);
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);

    e->master_port = DIST_ENV_DEFAULT_PORT;
    const char *port = dist_env_get("MASTER_PORT");
    if (port &&
        (dist_env_parse(port, &e->master_port) < 0 || e->master_port < 1 || e->master_port > 65535))
        return error_set("dist_env: MASTER_PORT='%s' is not a port number in 1..65535", port);

    e->node_rank = -1;
    if (dist_env_get("GROUP_RANK") && dist_env_int("GROUP_RANK", &e->node_rank) < 0)
        return -1;
    if (dist_env_get("TORCHELASTIC_RESTART_COUNT") &&
        dist_env_int("TORCHELASTIC_RESTART_COUNT", &e->restart_count) < 0)
        return -1;
    const char *agent = dist_env_get("TORCHELASTIC_USE_AGENT_STORE");
    e->agent_store = agent && (strcmp(agent, "True") == 0 || strcmp(agent, "true") == 0 ||
                               strcmp(agent, "1") == 0);
    const char *id = dist_env_get("TORCHELASTIC_RUN_ID");
    if (id && strcmp(id, "none") != 0)
        snprintf(e->run_id, sizeof e->run_id, "%s", id);
    return 0;
}
