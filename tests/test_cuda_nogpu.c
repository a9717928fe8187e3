/* test_cuda_nogpu.c — `ddpprof train --gpu 0` on a machine without a usable GPU (or in a
 * build without CUDA) fails cleanly: a non-zero exit status, not a signal, nothing on
 * stdout, and exactly one line on stderr that says GPU or CUDA.  Also --gpu with a device
 * list.  Skips (77) where a GPU is present: the GPU suites cover that machine. */
#include "common/vec.h"
#include "cuda/cuda_api.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_S 60 /* a failing start takes milliseconds; this only bounds a hang */

/* the whole of fd into a malloc'd string */
static char *slurp(int fd)
{
    size_t cap = 0, len = 0;
    char *buf = NULL;
    for (;;) {
        if (VEC_RESERVE(buf, cap, len + 4096))
            abort();
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    return buf;
}

/* run argv with stdout/stderr to temp files; returns the wait status (-1: had to kill) */
static int run(char *const argv[], char **out, char **err)
{
    char out_path[] = "/tmp/ddpprof-nogpu-out-XXXXXX", err_path[] = "/tmp/ddpprof-nogpu-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    if (fo < 0 || fe < 0) {
        perror("mkstemp");
        exit(1);
    }
    unlink(out_path);
    unlink(err_path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = test_wait_status(pid, LIMIT_S);
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    *out = slurp(fo);
    *err = slurp(fe);
    close(fo);
    close(fe);
    return status;
}

static void check_clean_failure(const char *what, char *const argv[])
{
    char *out, *err;
    int status = run(argv, &out, &err);
    CHECK(status != -1, "%s: still running after %d s", what, LIMIT_S);
    CHECK(status == -1 || WIFEXITED(status), "%s: killed by signal %d", what,
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0,
          "%s: exit status 0 without a GPU", what);
    CHECK(out[0] == '\0', "%s: printed on stdout: '%s'", what, out);
    const size_t n = strlen(err);
    const char *nl = strchr(err, '\n');
    CHECK(n > 1 && nl == err + n - 1, "%s: stderr is not exactly one line: '%s'", what, err);
    CHECK(strstr(err, "GPU") || strstr(err, "CUDA"), "%s: message names neither GPU nor CUDA: '%s'",
          what, err);
    printf("%s -> exit %d: %s", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
    free(out);
    free(err);
}

int main(void)
{
    if (cuda_build_enabled() && cuda_device_count() > 0)
        test_skip("a GPU is present: the no-GPU path is tested on machines without one");
    const char *bin = getenv("DDPPROF");
    CHECK(bin && access(bin, X_OK) == 0, "DDPPROF=%s is not an executable ddpprof",
          bin ? bin : "(unset)");
    if (!bin || access(bin, X_OK) != 0)
        return test_finish();
    char *tmp = test_tmpdir();
    char out_dir[4096];
    snprintf(out_dir, sizeof out_dir, "%s/run", tmp);

    char *baseline[] = {(char *)bin, "train", "--gpu", "0", "--epochs", "1", "--limit", "64",
                        "--test-limit", "64", "--out", out_dir, NULL};
    check_clean_failure("ddpprof train --gpu 0", baseline);
    char *ddp[] = {(char *)bin, "train", "--gpu", "0,1", "--mode", "ddp", "--epochs", "1",
                   "--limit", "64", "--test-limit", "64", "--out", out_dir, NULL};
    check_clean_failure("ddpprof train --gpu 0,1 --mode ddp", ddp);
    free(tmp);
    return test_finish();
}
