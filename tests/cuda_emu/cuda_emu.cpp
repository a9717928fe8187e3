/* cuda_emu.cpp — the scheduler and runtime calls behind cuda_emu.h: each block's threads
 * as ucontext coroutines on the calling OS thread, switched only at barriers. */
#include "cuda_emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

/* a thread's stack: kernels are leaf code plus libm; generous for a sanitizer build */
const size_t kStackBytes = (size_t)128 << 10;
const unsigned kMaxThreads = 1024;

enum thread_state { T_READY, T_AT_SYNC, T_AT_WARP, T_DONE };

struct emu_thread {
    ucontext_t ctx;
    thread_state state;
    dim3 idx;
};

struct emu_block {
    ucontext_t sched;
    emu_thread *threads;
    unsigned count;
    unsigned current;
    void (*body)(void *);
    void *ctx;
    /* the warp exchange area: 8 bytes per lane, per warp */
    unsigned char slots[kMaxThreads][8];
};

emu_block *blk;            /* the block running now */
unsigned char *stacks;     /* stacks_for stacks, grown to the largest block */
unsigned stacks_for;
cudaError_t last_error = cudaSuccess;
unsigned long long threads_run, blocks_run;

[[noreturn]] void emu_die(const char *what)
{
    fprintf(stderr,
            "cuda_emu: %s (block %u,%u,%u of grid %u,%u,%u, thread %u of %u): the kernel's "
            "threads can never all meet here; a GPU would hang or misbehave\n",
            what, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z,
            blk ? blk->current : 0u, blk ? blk->count : 0u);
    abort();
}

void thread_entry(void)
{
    blk->body(blk->ctx);
    blk->threads[blk->current].state = T_DONE;
    /* uc_link returns to the scheduler */
}

/* suspend the running thread in state s until the scheduler releases it */
void thread_wait(thread_state s)
{
    if (!blk)
        emu_die("a barrier outside a kernel");
    emu_thread *t = &blk->threads[blk->current];
    t->state = s;
    if (swapcontext(&t->ctx, &blk->sched) != 0)
        emu_die("swapcontext failed");
}

void check_mask(unsigned mask)
{
    if (mask != 0xffffffffu)
        emu_die("a warp operation with a partial mask (the emulation knows full warps only)");
}

/* Release what can go on: whole warps whose live lanes all wait at a warp operation,
 * else the whole block when every live thread waits at __syncthreads.  0 when every live
 * thread is waiting and none can be released: a deadlock. */
int release(emu_block *b)
{
    int released = 0;
    for (unsigned w = 0; w * 32 < b->count; w++) {
        const unsigned lo = w * 32, hi = lo + 32 < b->count ? lo + 32 : b->count;
        unsigned waiting = 0, live = 0;
        for (unsigned i = lo; i < hi; i++) {
            live += b->threads[i].state != T_DONE;
            waiting += b->threads[i].state == T_AT_WARP;
        }
        if (waiting && waiting == live) {
            for (unsigned i = lo; i < hi; i++)
                if (b->threads[i].state == T_AT_WARP)
                    b->threads[i].state = T_READY;
            released = 1;
        }
    }
    if (released)
        return 1;
    unsigned at_sync = 0, live = 0;
    for (unsigned i = 0; i < b->count; i++) {
        live += b->threads[i].state != T_DONE;
        at_sync += b->threads[i].state == T_AT_SYNC;
    }
    if (at_sync && at_sync == live) {
        for (unsigned i = 0; i < b->count; i++)
            if (b->threads[i].state == T_AT_SYNC)
                b->threads[i].state = T_READY;
        return 1;
    }
    return live == 0;
}

/* run thread i of the current block until it waits at a barrier or returns (in a
 * function of its own: nothing here is live across the switch) */
__attribute__((noinline)) void resume(unsigned i)
{
    blk->current = i;
    threadIdx = blk->threads[i].idx;
    if (swapcontext(&blk->sched, &blk->threads[i].ctx) != 0)
        emu_die("swapcontext failed");
}

/* thread i of block b set to start at thread_entry on its own stack (getcontext, like
 * setjmp, in a function of its own) */
__attribute__((noinline)) void init_thread(emu_block *b, unsigned i)
{
    emu_thread *t = &b->threads[i];
    if (getcontext(&t->ctx) != 0)
        emu_die("getcontext failed");
    t->ctx.uc_stack.ss_sp = stacks + (size_t)i * kStackBytes;
    t->ctx.uc_stack.ss_size = kStackBytes;
    t->ctx.uc_link = &b->sched;
    makecontext(&t->ctx, thread_entry, 0);
    t->state = T_READY;
    t->idx = dim3(i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y));
}

void run_block(emu_block *b)
{
    for (unsigned i = 0; i < b->count; i++)
        init_thread(b, i);
    for (;;) {
        int live = 0;
        for (unsigned i = 0; i < b->count; i++)
            if (b->threads[i].state == T_READY)
                resume(i);
        for (unsigned i = 0; i < b->count; i++)
            live += b->threads[i].state != T_DONE;
        if (!live)
            return;
        if (!release(b))
            emu_die("threads wait at barriers that cannot complete");
    }
}

} // namespace

void emu_run(dim3 grid, dim3 block, void (*body)(void *ctx), void *ctx)
{
    const unsigned long long per_block = (unsigned long long)block.x * block.y * block.z;
    if (per_block == 0 || per_block > kMaxThreads || block.z > 64 || grid.x == 0 ||
        grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        if (last_error == cudaSuccess)
            last_error = cudaErrorInvalidConfiguration;
        return;
    }
    if (per_block > stacks_for) {
        free(stacks);
        stacks = static_cast<unsigned char *>(malloc((size_t)per_block * kStackBytes));
        if (!stacks)
            emu_die("out of memory for the coroutine stacks");
        stacks_for = (unsigned)per_block;
    }
    emu_block *b = new emu_block();
    b->threads = new emu_thread[per_block];
    b->count = (unsigned)per_block;
    b->body = body;
    b->ctx = ctx;
    emu_block *outer = blk;
    blk = b;
    gridDim = grid;
    blockDim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = dim3(x, y, z);
                run_block(b);
                blocks_run++;
                threads_run += per_block;
            }
    blk = outer;
    delete[] b->threads;
    delete b;
}

void __syncthreads(void) { thread_wait(T_AT_SYNC); }

void emu_warp_exchange(const void *v, void *out, size_t bytes, int src, unsigned mask)
{
    check_mask(mask);
    if (bytes > 8)
        emu_die("a shuffle of more than 8 bytes");
    const unsigned me = blk->current, warp0 = me & ~31u;
    memcpy(blk->slots[me], v, bytes);
    thread_wait(T_AT_WARP);
    const unsigned from = warp0 + (unsigned)src;
    if (src >= 0 && src < 32 && from < blk->count)
        memcpy(out, blk->slots[from], bytes);
    else
        memcpy(out, v, bytes);
    thread_wait(T_AT_WARP); /* every lane has read before a lane writes again */
}

int emu_warp_any(int pred, unsigned mask)
{
    check_mask(mask);
    const unsigned me = blk->current, warp0 = me & ~31u;
    const unsigned hi = warp0 + 32 < blk->count ? warp0 + 32 : blk->count;
    memcpy(blk->slots[me], &pred, sizeof pred);
    thread_wait(T_AT_WARP);
    int any = 0;
    for (unsigned i = warp0; i < hi; i++) {
        int p;
        memcpy(&p, blk->slots[i], sizeof p);
        any |= blk->threads[i].state != T_DONE && p != 0;
    }
    thread_wait(T_AT_WARP);
    return any;
}

extern "C" cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t s)
{
    (void)s;
    if (bytes)
        memset(ptr, value, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind, (void)s;
    if (bytes)
        memmove(dst, src, bytes);
    return cudaSuccess;
}

extern "C" unsigned long long emu_threads_run(void) { return threads_run; }
extern "C" unsigned long long emu_blocks_run(void) { return blocks_run; }
