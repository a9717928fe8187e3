/* conv_pool.h — how the CPU backend's fast convolution modules (conv_dnnl.h, oneDNN's
 * kernels; conv_wino.h, the backend's own Winograd) run work on the backend's threads. */
#ifndef DDPPROF_CONV_POOL_H
#define DDPPROF_CONV_POOL_H

/* run(ctx, m, fn, arg) calls fn(arg, t) for t = 0..m-1 (t = 0 on the calling thread,
 * m <= threads) and returns when all are done.  chunk > 0 cuts the batch into slices of
 * at most chunk images (the backend's test knob, backend_cpu_create_chunked); 0: one
 * slice per thread. */
struct conv_pool {
    void (*run)(void *ctx, int m, void (*fn)(void *arg, int t), void *arg);
    void *ctx;
    int threads;
    int chunk;
};

#endif
