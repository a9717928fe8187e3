/* backend_cpu.h — the CPU backend's test knob.  backend_cpu_create (backend.h) is the
 * constructor the trainer uses; this one exists so tests can make the worker pool split
 * work the way no size would, and check that results do not depend on the split
 * (tests/test_backend_ops.c, pair cpu1-vs-cpuN). */
#ifndef DDPPROF_BACKEND_CPU_H
#define DDPPROF_BACKEND_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

struct backend;

/* backend_cpu_create(threads), except that with chunk > 0 every parallel loop is split
 * into pieces of chunk items (elements, channels or planes; the last piece shorter) dealt
 * to the threads round-robin, however small the op, and every convolution into chunks of
 * at most chunk images.  chunk = 0 is backend_cpu_create(threads).  NULL + error_set on
 * failure; free with be->destroy(be). */
struct backend *backend_cpu_create_chunked(int threads, int chunk);

#ifdef __cplusplus
}
#endif
#endif
