/* comm_gloo_stub.c — comm_gloo_create for a build without Gloo (see comm_gloo.h): CMake
 * compiles this file instead of comm_gloo.cc when libgloo-dev was not found, so the rest of
 * the trainer links and `--comm gloo` fails with one line saying what to install. */
#include "comm/comm_gloo.h"

#include "common/error.h"

#include <stddef.h>

struct comm *comm_gloo_create(struct store *store, const char *key_prefix, int rank, int world,
                              const char *peer_addr, int timeout_ms)
{
    (void)store, (void)key_prefix, (void)world, (void)peer_addr, (void)timeout_ms;
    error_set("comm gloo: rank %d: this ddpprof was built without Gloo (install libgloo-dev, "
              "e.g. apt-get install libgloo-dev, and rebuild; or use --comm shm on one host)",
              rank);
    return NULL;
}

int comm_gloo_available(void) { return 0; }
