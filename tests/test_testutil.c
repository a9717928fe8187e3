/* test_testutil.c — the C tests' reader of CSV tables by column name (testutil.h
 * test_csv_*): a column found by its header name wherever it stands (the same table with
 * its columns in another order and one more in the middle reads the same), quoted fields
 * (a comma, a doubled quote, a line break inside) are one field each, and a missing column
 * is a test failure naming the file and the column.  And the bounded wait for a child
 * (test_wait_child, _status, _code): a child that ends in time is reaped with its status, one
 * that overstays is SIGKILLed at the deadline. */
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void same_answers(const char *dir, const char *name)
{
    struct test_csv *t = test_csv_read(dir, name);
    CHECK(t != NULL, "%s: not read", name);
    if (!t)
        return;
    CHECK(t->nrows == 3, "%s: %d rows, want 3", name, t->nrows);
    int r = test_csv_find(t, 0, "run", "ddp", "rank", "1", NULL);
    CHECK(r == 1 && strcmp(test_csv_get(t, r, test_csv_col(t, "ms")), "2.5") == 0,
          "%s: ddp rank 1: row %d, ms '%s'", name, r, test_csv_get(t, r, test_csv_col(t, "ms")));
    CHECK(test_csv_find(t, 2, "run", "ddp", NULL) == -1, "%s: a third ddp row", name);
    CHECK(test_csv_find(t, 0, "run", "none", NULL) == -1, "%s: a row of run none", name);
    for (int i = 0; i < t->nrows; i++)
        CHECK(t->nfields[i] == t->ncols, "%s: row %d has %d fields", name, i, t->nfields[i]);
    test_csv_free(t);
}

static pid_t child(int exit_code, int sleep_s)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (sleep_s)
            sleep((unsigned)sleep_s);
        _exit(exit_code);
    }
    CHECK(pid > 0, "fork failed");
    return pid;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bounded_waits(void)
{
    int st = -7;
    CHECK(test_wait_child(child(3, 0), 10.0, &st) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 3,
          "a child exiting 3: status 0x%x", st);
    CHECK(test_wait_code(child(4, 0), 10.0) == 4, "a child exiting 4: code");
    int s5 = test_wait_status(child(5, 0), 10.0);
    CHECK(s5 >= 0 && WIFEXITED(s5) && WEXITSTATUS(s5) == 5, "a child exiting 5: status 0x%x", s5);
    pid_t self_killed = fork();
    if (self_killed == 0) {
        raise(SIGTERM);
        _exit(0);
    }
    CHECK(test_wait_code(self_killed, 10.0) == 128 + SIGTERM, "a child ended by SIGTERM: code");

    /* one that overstays: killed at the deadline (not at its own end, 30 s on) */
    double t0 = now_s();
    st = -7;
    int rc = test_wait_child(child(0, 30), 0.2, &st);
    double dt = now_s() - t0;
    CHECK(rc == -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && dt >= 0.2 && dt < 5.0,
          "an overstaying child: rc %d, status 0x%x after %.3f s", rc, st, dt);
    CHECK(test_wait_status(child(0, 30), 0.1) == -1, "an overstaying child: status");
    CHECK(test_wait_code(child(0, 30), 0.0) == -1, "an overstaying child: code");
}

int main(void)
{
    bounded_waits();
    char *dir = test_tmpdir();
    CHECK(dir != NULL, "no temp dir");
    if (!dir)
        return test_finish();
    static const char a[] = "run,rank,ms\nddp,0,1.5\nddp,1,2.5\nbase,0,9\n";
    static const char b[] = "ms,extra,rank,run\n1.5,x,0,ddp\n2.5,y,1,ddp\n9,z,0,base";
    test_write_file(dir, "a.csv", a, strlen(a));
    test_write_file(dir, "b.csv", b, strlen(b)); /* no newline at the end */
    same_answers(dir, "a.csv");
    same_answers(dir, "b.csv");

    static const char q[] = "name,kind,n\n\"a,b\",x,1\n\"say \"\"hi\"\"\",y,2\n\"two\nlines\",z,3\n"
                            "plain,w,4\n";
    test_write_file(dir, "q.csv", q, strlen(q));
    struct test_csv *t = test_csv_read(dir, "q.csv");
    CHECK(t && t->nrows == 4 && t->ncols == 3, "q.csv: %d rows", t ? t->nrows : -1);
    if (t) {
        int name = test_csv_col(t, "name"), n = test_csv_col(t, "n");
        const char *want[] = {"a,b", "say \"hi\"", "two\nlines", "plain"};
        for (int r = 0; r < 4 && r < t->nrows; r++) {
            CHECK(strcmp(test_csv_get(t, r, name), want[r]) == 0, "q.csv row %d: name '%s'", r,
                  test_csv_get(t, r, name));
            CHECK(atoi(test_csv_get(t, r, n)) == r + 1, "q.csv row %d: n '%s'", r,
                  test_csv_get(t, r, n));
            CHECK(t->nfields[r] == 3, "q.csv row %d: %d fields", r, t->nfields[r]);
        }
        /* a missing column: one failure (its message names file and column), -1, "" */
        fprintf(stderr, "(the two FAILs next are this test's missing column, on purpose)\n");
        int before = test_failed;
        int c = test_csv_col(t, "nope");
        int found = test_csv_find(t, 0, "nope", "1", NULL);
        int failures = test_failed - before;
        test_failed = before;
        CHECK(c == -1 && failures == 2 && found == -1 && strcmp(test_csv_get(t, 0, c), "") == 0,
              "a missing column: index %d, %d failure(s) recorded, row %d", c, failures, found);
        test_csv_free(t);
    }
    CHECK(test_csv_read(dir, "absent.csv") == NULL, "an absent file read");
    test_write_file(dir, "empty.csv", "", 0);
    CHECK(test_csv_read(dir, "empty.csv") == NULL, "an empty file read");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
    free(dir);
    return test_finish();
}
