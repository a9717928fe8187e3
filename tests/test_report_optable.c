/* test_report_optable.c — the op table (report/input/ops.h) on hand-made ops whose key_averages
 * figures are worked out below by torch's rule (torch/autograd/profiler_util.py,
 * EventList._populate_cpu_children: an op is the child of the innermost open op on its
 * thread that it starts before the end of and ends no later than; self = duration - the
 * children's durations): plain nesting, a sibling that outlives its elder sibling,
 * identical ranges (the first given is the parent), a zero-length op, ops of two threads
 * interleaved in time, an async op, ops that come too late for the stack (nested among the
 * kept ops), kernels and their minimum and maximum. */
#include <string.h>

#include "report/input/ops.h"
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
    enum { STEP = 1, FWD, CONV, ADD, EMPTY, OUTER, INNER, ZERO, OTHER, ASYNC, K1, K2, LAUNCH, DRIVER };
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
    /* ops further out of order than the reorder window (Kineto's runtime calls, written
     * after every CPU op): leaves, nested among the kept ops by the same rule: [15, 20)
     * after EMPTY [12, 14), which does not hold it, in CONV; [71, 72) in INNER (the later
     * of two equal ranges); one on a thread with no kept ops in nothing (counted) */
    CHECK(op_table_cpu(&t, 1, 15, 20, LAUNCH) == 0, "late launch in conv");
    CHECK(op_table_cpu(&t, 1, 71, 72, LAUNCH) == 0, "late launch in inner");
    CHECK(op_table_cpu(&t, 9, 50, 51, LAUNCH) == 0, "late launch, no history");
    /* a late op in a late one before it (a driver call in its runtime call): nested there,
     * not in the kept op that holds both (ADD [25, 45) holds [26, 30) holds [27, 28)) */
    CHECK(op_table_cpu(&t, 1, 26, 30, LAUNCH) == 0, "late launch in add");
    CHECK(op_table_cpu(&t, 1, 27, 28, DRIVER) == 0, "late driver call in the launch");
    CHECK(t.late == 5 && t.late_unnested == 1, "late %llu, unnested %llu",
          (unsigned long long)t.late, (unsigned long long)t.late_unnested);
    CHECK(op_table_kernel(&t, K1, KERNEL_COMPUTE, 1000, 1500) == 0, "k1");
    CHECK(op_table_kernel(&t, K1, KERNEL_COMPUTE, 100, 300) == 0, "k1 again");
    CHECK(op_table_kernel(&t, K2, KERNEL_COMM, 50, 50) == 0, "k2");
    CHECK(op_table_finish(&t) == 0, "finish");

    EXPECT(&t, OP_CPU, STEP, 1, 100, 100 - 50 - 10 - 0);
    EXPECT(&t, OP_CPU, FWD, 1, 50, 50 - 20 - 20);
    EXPECT(&t, OP_CPU, CONV, 1, 20, 20 - 2 - 5);
    EXPECT(&t, OP_CPU, EMPTY, 2, 2 + 10, 2 + 10);
    EXPECT(&t, OP_CPU, ADD, 1, 20, 20 - 4);
    EXPECT(&t, OP_CPU, DRIVER, 1, 1, 1);
    EXPECT(&t, OP_CPU, OUTER, 1, 10, 0);
    EXPECT(&t, OP_CPU, LAUNCH, 4, 5 + 1 + 1 + 4, 5 + 1 + 1 + 4 - 1);
    EXPECT(&t, OP_CPU, INNER, 1, 10, 10 - 1);
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

    /* PyTorch's tree (EventList._remove_dup_nodes): an only child of its parent's name is
     * no op, its children are the parent's: DUP [0, 100) > DUP [10, 90) > ADD [20, 30)
     * counts one DUP, self 100 - 10; DUP [200, 300) with two DUP children [210, 220),
     * [230, 240) counts all three: self 100 - 20, 10, 10; a DUP whose only DUP child has a
     * DUP only child of its own [400, 500) > [410, 490) > [420, 480) > ADD [430, 440)
     * collapses to one: self 100 - 10 */
    enum { DUP = 1, PLUS };
    struct op_table d;
    memset(&d, 0, sizeof d);
    op_table_torch(&d);
    static const int64_t ops[][3] = {
        {0, 100, DUP},   {10, 90, DUP},   {20, 30, PLUS},  {200, 300, DUP},
        {210, 220, DUP}, {230, 240, DUP}, {400, 500, DUP}, {410, 490, DUP},
        {420, 480, DUP}, {430, 440, PLUS}};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        CHECK(op_table_cpu(&d, 1, ops[i][0], ops[i][1], (uint32_t)ops[i][2]) == 0, "dup op");
    op_table_finish(&d);
    EXPECT(&d, OP_CPU, DUP, 1 + 3 + 1, 100 + 120 + 100, 90 + 80 + 10 + 10 + 90);
    EXPECT(&d, OP_CPU, PLUS, 2, 20, 20);
    op_table_free(&d);
    /* without it (Nsight Systems' ranges), every one counts */
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        CHECK(op_table_cpu(&d, 1, ops[i][0], ops[i][1], (uint32_t)ops[i][2]) == 0, "dup op");
    op_table_finish(&d);
    EXPECT(&d, OP_CPU, DUP, 8, 100 + 80 + 100 + 10 + 10 + 100 + 80 + 60,
           20 + 70 + 80 + 10 + 10 + 20 + 20 + 50);
    op_table_free(&d);

    /* the history stops at OPS_HISTORY ops: a late op within the first kept op is nested,
     * one after the last kept one is not (counted) */
    struct op_table h;
    memset(&h, 0, sizeof h);
    for (int64_t i = 0; i < (int64_t)OPS_HISTORY + 10; i++)
        if (op_table_cpu(&h, 5, 10 * i, 10 * i + 5, 1) < 0)
            CHECK(0, "history op %lld", (long long)i);
    CHECK(op_table_cpu(&h, 5, 1, 2, 2) == 0 && op_table_cpu(&h, 5, 10 * (int64_t)OPS_HISTORY + 51,
                                                           10 * (int64_t)OPS_HISTORY + 52, 2) == 0,
          "late ops");
    CHECK(h.late == 2 && h.late_unnested == 1, "late %llu, unnested %llu",
          (unsigned long long)h.late, (unsigned long long)h.late_unnested);
    op_table_finish(&h);
    EXPECT(&h, OP_CPU, 1, (int64_t)OPS_HISTORY + 10, 5 * ((int64_t)OPS_HISTORY + 10),
           5 * ((int64_t)OPS_HISTORY + 10) - 1);
    op_table_free(&h);

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
