/* cuda_emu.cpp — the scheduler and runtime calls behind cuda_emu.h: each block's threads
 * as coroutines on the calling OS thread, switched only at barriers.
 *
 * A switch on x86-64 is a few instructions of our own (the callee-saved registers and the
 * stack pointer: emu_ctx_switch below), told to AddressSanitizer as a fiber switch where
 * it is on; elsewhere ucontext's swapcontext, which also saves the signal mask with a
 * system call per switch (that made ResNet18's per-channel reductions, 256 threads a
 * block and a dozen barriers each, take minutes per training step). */
#include "cuda_emu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#define EMU_FAST_SWITCH 1
#else
#define EMU_FAST_SWITCH 0
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif
#if EMU_ASAN && EMU_FAST_SWITCH
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

dim3 threadIdx, blockIdx, blockDim, gridDim;

#if EMU_FAST_SWITCH
/* Save the callee-saved registers on the current stack, store its pointer in *from, load
 * `to` as the stack pointer and restore the registers saved there; returns on that stack
 * (into whoever switched away from it, or into a new thread's entry: ctx_init). */
extern "C" void emu_ctx_switch(void **from, void *to);
asm(".text\n"
    ".globl emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n"
    ".text\n");
#endif

namespace {

/* a thread's stack: kernels are leaf code plus libm; generous for a sanitizer build (and
 * small otherwise: a block's stacks are all touched at every barrier) */
const size_t kStackBytes = (size_t)(EMU_ASAN ? 128 : 32) << 10;
const unsigned kMaxThreads = 1024;

enum thread_state { T_READY, T_AT_SYNC, T_AT_WARP, T_DONE };

struct emu_thread {
#if EMU_FAST_SWITCH
    void *sp; /* saved stack pointer while not running */
    unsigned char *stack;
#else
    ucontext_t ctx;
#endif
    thread_state state;
    dim3 idx;
};

struct emu_block {
#if EMU_FAST_SWITCH
    void *sched_sp;
#else
    ucontext_t sched;
#endif
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
emu_ops ops; /* what a GPU would have run (emu_ops_get) */

#if EMU_ASAN && EMU_FAST_SWITCH
/* AddressSanitizer's fiber bookkeeping: the scheduler's stack, and what each side saves */
const void *sched_bottom;
size_t sched_size;
void *sched_fake;
#endif

[[noreturn]] void emu_die(const char *what)
{
    fprintf(stderr,
            "cuda_emu: %s (block %u,%u,%u of grid %u,%u,%u, thread %u of %u): the kernel's "
            "threads can never all meet here; a GPU would hang or misbehave\n",
            what, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z,
            blk ? blk->current : 0u, blk ? blk->count : 0u);
    abort();
}

#if EMU_FAST_SWITCH

/* the running thread gives the CPU back to the scheduler (done: it never runs again) */
void to_scheduler(emu_thread *t, bool done)
{
#if EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(done ? NULL : &fake, sched_bottom, sched_size);
    emu_ctx_switch(&t->sp, blk->sched_sp);
    __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#else
    (void)done;
    emu_ctx_switch(&t->sp, blk->sched_sp);
#endif
}

/* where a thread starts (ctx_init): never returns, it switches away for good */
[[noreturn]] void thread_entry(void)
{
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &sched_bottom, &sched_size);
#endif
    blk->body(blk->ctx);
    emu_thread *t = &blk->threads[blk->current];
    t->state = T_DONE;
    to_scheduler(t, true);
    emu_die("a finished thread was resumed");
}

/* thread t to start at thread_entry on its stack: the registers' slots (zero) and the
 * entry's address laid out as emu_ctx_switch pops them, over a fake return address so the
 * entry sees the stack alignment of a called function */
void ctx_init(emu_thread *t, unsigned char *stack)
{
    t->stack = stack;
#if EMU_ASAN
    /* the stack is reused by block after block: the redzones a finished thread's frames
     * left in AddressSanitizer's shadow would read as overflows of the next thread's */
    __asan_unpoison_memory_region(stack, kStackBytes);
#endif
    uintptr_t top = ((uintptr_t)stack + kStackBytes) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                              /* the entry's return address: none */
    *--sp = (void *)(uintptr_t)&thread_entry;  /* popped by emu_ctx_switch's ret */
    for (int r = 0; r < 6; r++)
        *--sp = NULL;                          /* rbp, rbx, r12-r15 */
    t->sp = sp;
}

/* run thread i of the current block until it waits at a barrier or returns */
__attribute__((noinline)) void resume(unsigned i)
{
    blk->current = i;
    threadIdx = blk->threads[i].idx;
#if EMU_ASAN
    __sanitizer_start_switch_fiber(&sched_fake, blk->threads[i].stack, kStackBytes);
    emu_ctx_switch(&blk->sched_sp, blk->threads[i].sp);
    __sanitizer_finish_switch_fiber(sched_fake, NULL, NULL);
#else
    emu_ctx_switch(&blk->sched_sp, blk->threads[i].sp);
#endif
}

/* suspend the running thread in state s until the scheduler releases it */
void thread_wait(thread_state s)
{
    if (!blk)
        emu_die("a barrier outside a kernel");
    emu_thread *t = &blk->threads[blk->current];
    t->state = s;
    to_scheduler(t, false);
}

#else /* ucontext */

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

/* run thread i of the current block until it waits at a barrier or returns (in a
 * function of its own: nothing here is live across the switch) */
__attribute__((noinline)) void resume(unsigned i)
{
    blk->current = i;
    threadIdx = blk->threads[i].idx;
    if (swapcontext(&blk->sched, &blk->threads[i].ctx) != 0)
        emu_die("swapcontext failed");
}

#endif

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

/* thread i of block b set to start at thread_entry on its own stack (getcontext, like
 * setjmp, in a function of its own) */
__attribute__((noinline)) void init_thread(emu_block *b, unsigned i)
{
    emu_thread *t = &b->threads[i];
#if EMU_FAST_SWITCH
    ctx_init(t, stacks + (size_t)i * kStackBytes);
#else
    if (getcontext(&t->ctx) != 0)
        emu_die("getcontext failed");
    t->ctx.uc_stack.ss_sp = stacks + (size_t)i * kStackBytes;
    t->ctx.uc_stack.ss_size = kStackBytes;
    t->ctx.uc_link = &b->sched;
    makecontext(&t->ctx, thread_entry, 0);
#endif
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
    ops.kernels++;
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
    ops.memsets++;
    if (bytes)
        memset(ptr, value, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)s;
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidValue;
    ops.memcpys[kind]++;
    if (bytes)
        memmove(dst, src, bytes);
    return cudaSuccess;
}

/* ------------------------------------------------------------------ the rest of the runtime */

struct emu_stream {
    unsigned flags;
};
struct emu_event {
    unsigned flags;
};

namespace {
int current_device;
} // namespace

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "emulated GPU (tests/cuda_emu)");
    for (int i = 0; i < 16; i++)
        prop->uuid.bytes[i] = (char)(0xe0 + i);
    prop->totalGlobalMem = (size_t)16 << 30;
    prop->major = 9;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int device)
{
    if (device != 0)
        return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}

extern "C" cudaError_t cudaDriverGetVersion(int *version)
{
    *version = 13000;
    return cudaSuccess;
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = 13000;
    return cudaSuccess;
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
        return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : "an emulated CUDA error (tests/cuda_emu)";
}

extern "C" cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

extern "C" cudaError_t cudaFree(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }

extern "C" cudaError_t cudaFreeHost(void *ptr) { return cudaFree(ptr); }

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new emu_stream{flags};
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    delete s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new emu_event{flags};
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e, (void)s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

extern "C" void emu_ops_get(struct emu_ops *o) { *o = ops; }

extern "C" void emu_ops_reset(void) { ops = emu_ops(); }

extern "C" unsigned long long emu_ops_total(const struct emu_ops *o)
{
    unsigned long long t =
        o->kernels + o->memsets + o->cudnn_convs + o->cublas_gemms + o->cudnn_transforms;
    for (int k = 0; k < 5; k++)
        t += o->memcpys[k];
    return t;
}

extern "C" void emu_ops_library(int which)
{
    if (which == 0)
        ops.cudnn_convs++;
    else if (which == 1)
        ops.cublas_gemms++;
    else
        ops.cudnn_transforms++;
}

extern "C" unsigned long long emu_threads_run(void) { return threads_run; }
extern "C" unsigned long long emu_blocks_run(void) { return blocks_run; }
