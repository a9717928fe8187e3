/* test_report_optable.c — the op table (report/ops.h) on hand-made ops whose key_averages
 * figures are worked out below by torch's rule (torch/autograd/profiler_util.py,
 * EventList._populate_cpu_children: an op is the child of the innermost open op on its
 * thread that it starts before the end of and ends no later than; self = duration - the
 * children's durations): plain nesting, a sibling that outlives its elder sibling,
 * identical ranges (the first given is the parent), a zero-length op, ops of two threads
 * interleaved in time, an async op, kernels and their minimum and maximum. */
#include <string.h>

#include "report/ops.h"
#include "testutil.h"

static const struct op_stat *find(const struct op_table *t, int kind, uint32_t name)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].kind == kind && t->v[i].name == name)
            return &t->v[i];
    return NULL;
}

#define EXPECT(t, kind, name, calls_, total_, self_)                                          \
    do {                                                                                      \
        const struct op_stat *s_ = find((t), (kind), (name));                                 \
        CHECK(s_ != NULL, "op %u missing", (unsigned)(name));                                 \
        if (s_) {                                                                             \
            CHECK(s_->calls == (calls_), "op %u calls %lld, want %lld", (unsigned)(name),     \
                  (long long)s_->calls, (long long)(calls_));                                 \
            CHECK(s_->total_ns == (total_), "op %u total %lld, want %lld", (unsigned)(name),  \
                  (long long)s_->total_ns, (long long)(total_));                              \
            CHECK(s_->self_ns == (self_), "op %u self %lld, want %lld", (unsigned)(name),     \
                  (long long)s_->self_ns, (long long)(self_));                                \
        }                                                                                     \
    } while (0)

int main(void)
{
    struct op_table t;
    memset(&t, 0, sizeof t);
    enum { STEP = 1, FWD, CONV, ADD, EMPTY, OUTER, INNER, ZERO, OTHER, ASYNC, K1, K2 };
    /* thread 1, in (start, end desc) order:
     *   STEP   [0, 100)
     *   FWD    [10, 60)    child of STEP
     *   CONV   [10, 30)    child of FWD
     *   EMPTY  [12, 14)    child of CONV
     *   ADD    [25, 45)    ends after CONV: CONV is done, child of FWD
     *   OUTER  [70, 80)    child of STEP
     *   INNER  [70, 80)    the same range, given after: child of OUTER
     *   ZERO   [80, 80)    starts at OUTER's end: child of STEP, no duration
     * thread 2, interleaved: OTHER [20, 90) holds nothing of thread 1's */
    CHECK(op_table_cpu(&t, 1, 0, 100, STEP) == 0, "step");
    CHECK(op_table_cpu(&t, 1, 10, 60, FWD) == 0, "fwd");
    CHECK(op_table_cpu(&t, 1, 10, 30, CONV) == 0, "conv");
    CHECK(op_table_cpu(&t, 1, 12, 14, EMPTY) == 0, "empty");
    CHECK(op_table_cpu(&t, 2, 20, 90, OTHER) == 0, "other");
    CHECK(op_table_cpu(&t, 1, 25, 45, ADD) == 0, "add");
    CHECK(op_table_cpu(&t, 1, 70, 80, OUTER) == 0, "outer");
    CHECK(op_table_cpu(&t, 1, 70, 80, INNER) == 0, "inner");
    CHECK(op_table_cpu(&t, 1, 80, 80, ZERO) == 0, "zero");
    /* a second step: the first one's ops close; EMPTY again, at top level of its thread */
    CHECK(op_table_cpu(&t, 1, 200, 210, EMPTY) == 0, "empty 2");
    CHECK(op_table_async(&t, ASYNC, 5, 95) == 0, "async");
    CHECK(op_table_kernel(&t, K1, KERNEL_COMPUTE, 1000, 1500) == 0, "k1");
    CHECK(op_table_kernel(&t, K1, KERNEL_COMPUTE, 100, 300) == 0, "k1 again");
    CHECK(op_table_kernel(&t, K2, KERNEL_COMM, 50, 50) == 0, "k2");
    CHECK(op_table_finish(&t) == 0, "finish");

    EXPECT(&t, OP_CPU, STEP, 1, 100, 100 - 50 - 10 - 0);
    EXPECT(&t, OP_CPU, FWD, 1, 50, 50 - 20 - 20);
    EXPECT(&t, OP_CPU, CONV, 1, 20, 20 - 2);
    EXPECT(&t, OP_CPU, EMPTY, 2, 2 + 10, 2 + 10);
    EXPECT(&t, OP_CPU, ADD, 1, 20, 20);
    EXPECT(&t, OP_CPU, OUTER, 1, 10, 0);
    EXPECT(&t, OP_CPU, INNER, 1, 10, 10);
    EXPECT(&t, OP_CPU, ZERO, 1, 0, 0);
    EXPECT(&t, OP_CPU, OTHER, 1, 70, 70);
    EXPECT(&t, OP_CPU, ASYNC, 1, 90, 0);
    EXPECT(&t, OP_KERNEL, K1, 2, 700, 0);
    EXPECT(&t, OP_KERNEL, K2, 1, 0, 0);
    const struct op_stat *k1 = find(&t, OP_KERNEL, K1), *empty = find(&t, OP_CPU, EMPTY);
    CHECK(k1 && k1->min_ns == 200 && k1->max_ns == 500 && k1->cls == KERNEL_COMPUTE,
          "kernel min/max/class");
    CHECK(empty && empty->min_ns == 2 && empty->max_ns == 10, "op min/max");
    CHECK(find(&t, OP_CPU, K1) == NULL, "a kernel is not a CPU op of the same name");
    CHECK(op_table_any(&t), "any");
    op_table_free(&t);
    CHECK(!op_table_any(&t), "freed");

    /* many names: the hash grows and keeps every one */
    struct op_table m;
    memset(&m, 0, sizeof m);
    for (uint32_t i = 0; i < 5000; i++)
        CHECK(op_table_cpu(&m, 7, 10 * (int64_t)i, 10 * (int64_t)i + 5, i % 1000) == 0, "many");
    op_table_finish(&m);
    CHECK(m.n == 1000, "1000 names, got %zu", m.n);
    EXPECT(&m, OP_CPU, 999, 5, 25, 25);
    op_table_free(&m);
    return test_finish();
}
