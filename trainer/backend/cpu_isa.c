/* cpu_isa.c — the machine's vector ISA and the DDPPROF_MAX_CPU_ISA cap (cpu_isa.h). */
#include "backend/cpu_isa.h"

#include "common/error.h"

#include <stdlib.h>
#include <strings.h>

static const char *const names[CPU_ISA_COUNT] = {"default", "avx2", "avx512"};

const char *cpu_isa_name(enum cpu_isa isa)
{
    return (unsigned)isa < CPU_ISA_COUNT ? names[isa] : "?";
}

enum cpu_isa cpu_isa_machine(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("avx512f"))
        return CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return CPU_ISA_AVX2;
#endif
    return CPU_ISA_DEFAULT;
}

int cpu_isa_get(enum cpu_isa *isa)
{
    *isa = cpu_isa_machine();
    const char *cap = getenv("DDPPROF_MAX_CPU_ISA");
    if (!cap || !*cap)
        return 0;
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (strcasecmp(cap, names[i]) == 0) {
            if ((enum cpu_isa)i < *isa)
                *isa = (enum cpu_isa)i;
            return 0;
        }
    return error_set("DDPPROF_MAX_CPU_ISA=%.40s: not an instruction set this build knows: use "
                     "avx512, avx2 or default (or unset it for the machine's best)",
                     cap);
}
