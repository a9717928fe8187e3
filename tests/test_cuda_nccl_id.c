/* test_cuda_nccl_id.c — the NCCL unique id travels through the rendezvous store between
 * two real processes (ncclGetUniqueId needs no GPU, so this runs on any machine with the
 * toolkit): rank 1 receives exactly rank 0's 128 bytes, a second exchange under the next
 * key carries a fresh id, a value of the wrong size is refused with a one-line error, and a
 * missing id times out naming the key instead of hanging.  Skips (77) without CUDA. */
#include "cuda/cuda_api.h"
#include "common/error.h"
#include "comm/store.h"
#include "launch/dist_env.h"
#include "launch/launcher.h"
#include "testutil.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOST DIST_ENV_DEFAULT_ADDR /* this machine */
#define STORE_TIMEOUT_MS 5000


static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* rank 1: receive two ids and echo them back; exit status = failed checks */
static int rank1(int port)
{
    struct store *s = store_create(HOST, port, 0, 1, 2, STORE_TIMEOUT_MS);
    CHECK(s != NULL, "rank 1 store: %s", error_get());
    if (!s)
        return test_finish();
    unsigned char id[128];
    CHECK(comm_nccl_exchange_id(s, 1, "nccl_id", id) == 0, "rank 1 first id: %s", error_get());
    CHECK(store_set(s, "echo.0", id, sizeof id) == 0, "echo 0: %s", error_get());
    CHECK(comm_nccl_exchange_id(s, 1, "nccl_id.1", id) == 0, "rank 1 second id: %s",
          error_get());
    CHECK(store_set(s, "echo.1", id, sizeof id) == 0, "echo 1: %s", error_get());
    /* rank 0 put 5 bytes under "short": not an id */
    error_clear();
    CHECK(comm_nccl_exchange_id(s, 1, "short", id) == -1, "a 5-byte id was accepted");
    CHECK(strstr(error_get(), "128") && !strchr(error_get(), '\n'), "short id error: '%s'",
          error_get());
    CHECK(store_barrier(s, "done") == 0, "rank 1 barrier: %s", error_get());
    store_destroy(s);
    return test_finish();
}

int main(void)
{
    if (!cuda_build_enabled())
        test_skip("this build has no CUDA (toolkit not found or -DDDPPROF_CUDA=OFF)");
    const int port = launcher_free_port();
    fflush(stdout);
    pid_t pid = fork(); /* before any thread exists in this process */
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0)
        _exit(rank1(port) ? 1 : 0);

    struct store *s = store_create(HOST, port, 1, 0, 2, STORE_TIMEOUT_MS);
    CHECK(s != NULL, "rank 0 store: %s", error_get());
    if (s) {
        unsigned char id0[128], id1[128], echo[128];
        size_t len = 0;
        CHECK(comm_nccl_exchange_id(s, 0, "nccl_id", id0) == 0, "rank 0 first id: %s",
              error_get());
        CHECK(!all_zero(id0, sizeof id0), "ncclGetUniqueId gave 128 zero bytes");
        CHECK(store_get(s, "echo.0", echo, sizeof echo, &len) == 0 && len == sizeof echo,
              "echo 0: %s (%zu bytes)", error_get(), len);
        CHECK(memcmp(id0, echo, sizeof id0) == 0, "rank 1 received a different first id");
        CHECK(comm_nccl_exchange_id(s, 0, "nccl_id.1", id1) == 0, "rank 0 second id: %s",
              error_get());
        CHECK(memcmp(id0, id1, sizeof id0) != 0, "two ncclGetUniqueId calls gave the same id");
        CHECK(store_get(s, "echo.1", echo, sizeof echo, &len) == 0 && len == sizeof echo,
              "echo 1: %s (%zu bytes)", error_get(), len);
        CHECK(memcmp(id1, echo, sizeof id1) == 0, "rank 1 received a different second id");
        CHECK(store_set(s, "short", "abcde", 5) == 0, "short: %s", error_get());
        CHECK(store_barrier(s, "done") == 0, "rank 0 barrier: %s", error_get());
    }

    int status = 0;
    if (test_wait_child(pid, 30.0, &status) < 0)
        CHECK(0, "rank 1 did not finish within 30 s");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1 failed (status 0x%x)", status);
    if (s)
        store_destroy(s);

    /* a rank whose id never comes: bounded by the store's timeout, naming the key */
    const int port2 = launcher_free_port();
    struct store *lonely = store_create(HOST, port2, 1, 0, 2, 300);
    CHECK(lonely != NULL, "store for the timeout case: %s", error_get());
    if (lonely) {
        unsigned char id[128];
        error_clear();
        CHECK(comm_nccl_exchange_id(lonely, 1, "nccl_id.never", id) == -1,
              "waiting for an id nobody sets succeeded");
        CHECK(strstr(error_get(), "nccl_id.never") != NULL, "timeout error does not name the "
              "key: '%s'", error_get());
        store_abort(lonely);
    }
    return test_finish();
}
