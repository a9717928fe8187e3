/* cpu_isa.h — which x86 vector instructions the CPU backend's own loops run: the best the
 * machine has (AVX-512, AVX2, or the x86-64 baseline), capped by the environment variable
 * DDPPROF_MAX_CPU_ISA (avx512 | avx2 | default), as oneDNN's ONEDNN_MAX_CPU_ISA caps its
 * kernels.  With a cap below the machine's, the backend also caps oneDNN (conv_dnnl.c,
 * where ONEDNN_MAX_CPU_ISA and DNNL_MAX_CPU_ISA are unset), so one variable runs every
 * kernel of the project on the path of a smaller machine: the tests run the kernels'
 * suites once on the machine's path and once held to AVX2 (tests/CMakeLists.txt), so a
 * difference of either path shows on any machine that has both. */
#ifndef DDPPROF_CPU_ISA_H
#define DDPPROF_CPU_ISA_H

#ifdef __cplusplus
extern "C" {
#endif

enum cpu_isa { CPU_ISA_DEFAULT, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_COUNT };

/* The best ISA this machine has, whatever the cap. */
enum cpu_isa cpu_isa_machine(void);

/* The ISA the loops run in *isa: the machine's, lowered to DDPPROF_MAX_CPU_ISA when that is
 * set.  0, or -1 + error_set when the variable names no ISA (one line saying which it
 * takes). */
int cpu_isa_get(enum cpu_isa *isa);

/* "avx512", "avx2", "default" */
const char *cpu_isa_name(enum cpu_isa isa);

#ifdef __cplusplus
}
#endif
#endif
