/* fuzz_util.h — what every fuzz target shares: the libFuzzer entry point, checks that
 * abort (so libFuzzer and the replay tests see a crash), and in-memory files for parsers
 * that read a path.
 *
 * A target is one fuzz_<name>.c defining LLVMFuzzerTestOneInput.  It is linked twice: with
 * clang's -fsanitize=fuzzer into fuzz_<name> (scripts/fuzz runs it), and with replay.c's
 * main into fuzz_replay_<name>, a plain program of the normal build that runs the target
 * once on every file of fuzz/corpus/<name>/ and fuzz/regress/<name>/ (a ctest each). */
#ifndef DDPPROF_FUZZ_UTIL_H
#define DDPPROF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The target: parse data[0..size) every way the program would.  Returns 0 (libFuzzer's
 * contract); a broken invariant aborts through FUZZ_CHECK. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Print "fuzz: FILE:LINE: what" and abort: a finding, shown with the input by libFuzzer. */
_Noreturn void fuzz_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define FUZZ_CHECK(cond, ...)                                                                \
    do {                                                                                     \
        if (!(cond))                                                                         \
            fuzz_fail(__FILE__, __LINE__, __VA_ARGS__);                                      \
    } while (0)

/* A parser's status: 0, or -1 with one error line (error_get() non-empty, no line break:
 * the project's error contract, common/error.h).  Anything else aborts.  Returns rc. */
int fuzz_status(int rc, const char *what);

/* The file /proc/self/fd/N of in-memory file number slot (0..7, created on first use)
 * holding exactly data[0..size), for parsers that open a path.  Returns the path (static
 * storage, one per slot); aborts when the kernel gives no memfd. */
const char *fuzz_memfile(int slot, const uint8_t *data, size_t size);

/* A directory of this process for targets that read a run directory (under $TMPDIR, else
 * /tmp); created on first use, removed with its files at exit. */
const char *fuzz_dir(void);

/* Write data[0..size) to fuzz_dir()/name (replacing it); aborts when it cannot. */
void fuzz_write(const char *name, const uint8_t *data, size_t size);

/* Remove fuzz_dir()/name if it is there. */
void fuzz_remove(const char *name);

/* The next piece of a multi-part input: the bytes up to the next separator sep (a line of
 * its own, e.g. "\n--meta--\n"), or to the end.  *at advances past the separator.  Returns
 * 0 when there is no piece left. */
int fuzz_split(const uint8_t *data, size_t size, size_t *at, const char *sep,
               const uint8_t **piece, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
