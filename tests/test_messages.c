/* test_messages.c — messages that agree with the program (issue 15): the store's hints
 * name the right rank (rank 0, which hosts the store, is not asked "is rank 0 running?"),
 * and a DDP worker's error carries its rank once (main prefixes "rank N:"; the messages
 * below it no longer start with it too: "rank 0: rank 0: ..."). */
#include "comm/store.h"
#include "common/error.h"
#include "launch/launcher.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_store_hints(void)
{
    int port = launcher_free_port();
    CHECK(port > 0, "no free port");
    /* rank 0 hosts the store and waits for a key another rank would set */
    struct store *s0 = store_create("127.0.0.1", port, 1, 0, 2, 300);
    CHECK(s0 != NULL, "rank 0's store: %s", error_get());
    if (s0) {
        char buf[16];
        size_t len = 0;
        CHECK(store_get(s0, "never-set", buf, sizeof buf, &len) == -1 &&
                  strstr(error_get(), "waiting for key 'never-set' (rank 0 of 2; did every "
                                      "other rank start?)") &&
                  !strstr(error_get(), "is rank 0 running"),
              "rank 0 waiting: '%s'", error_get());
        store_abort(s0);
    }
    /* rank 1 finds no store: it asks after rank 0 */
    int dead = launcher_free_port();
    struct store *s1 = store_create("127.0.0.1", dead, 0, 1, 2, 300);
    CHECK(!s1 && strstr(error_get(), "(rank 1 of 2; last error: ") &&
              strstr(error_get(), "is rank 0 running?"),
          "rank 1 without a store: '%s'", s1 ? "(connected)" : error_get());
    if (s1)
        store_abort(s1);
}

/* the DDP worker's errors: "[rank N] ddpprof: rank N: <message>" without a second prefix */
static void test_worker_prefix(void)
{
    const char *bin = getenv("DDPPROF");
    if (!bin) {
        CHECK(0, "DDPPROF is not set (run through ctest)");
        return;
    }
    char *dir = test_tmpdir(), cmd[8192];
    /* a 100 KiB file size limit: the shm segment cannot be sized, on every rank */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && (ulimit -f 100; trap '' XFSZ; exec '%s' train --cpu 2 --mode ddp "
             "--dataset synthetic --limit 64 --epochs 1 --quiet --timeout 10 --out run) "
             ">out.txt 2>err.txt </dev/null",
             dir, bin);
    int rc = system(cmd);
    char *err = test_read_file(dir, "err.txt");
    CHECK(rc != 0 && err && strstr(err, "[rank 0] ddpprof: rank 0: comm shm:"),
          "a worker's error: '%s'", err ? err : "(none)");
    CHECK(err && !strstr(err, "rank 0: rank 0:") && !strstr(err, "rank 1: rank 1:"),
          "a doubled rank prefix: '%s'", err ? err : "");
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(dir);
}

int main(void)
{
    test_store_hints();
    test_worker_prefix();
    return test_finish();
}
