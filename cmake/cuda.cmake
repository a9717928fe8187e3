# cmake/cuda.cmake — how the CUDA backend and NCCL comm build, included from
# trainer/CMakeLists.txt when the toolkit with cuDNN and NCCL was found (DDPPROF_HAVE_CUDA).
# The root CMakeLists.txt enabled the CUDA language and chose CMAKE_CUDA_ARCHITECTURES
# (sm_80 and sm_90 by default); ddpprof_cuda_module (libddpprof_cuda.so, which
# cuda_loader.c loads on first use) already holds trainer/cuda/*.c and *.cu and the NCCL
# comm (trainer/comm/cuda/comm_nccl.c, the object library ddpprof_comm_nccl).

# .cu files: every nvcc and host-compiler warning is an error (unless -DDDPPROF_WERROR=OFF),
# as -Wall -Wextra -Werror is for C; line info lets Nsight Compute and compute-sanitizer point at source lines.
# --fmad=false: no multiply-add contraction, as the C build (ISO C11, -ffp-contract=off),
# so the elementwise kernels round exactly as the CPU oracle does (they are memory-bound:
# contraction would buy no speed); cuDNN and cuBLAS are not affected.
if(DDPPROF_WERROR)
  set(_cu_warn --Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror)
else()
  set(_cu_warn -Xcompiler=-Wall,-Wextra)
endif()
target_compile_options(ddpprof_cuda_module PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:${_cu_warn} -lineinfo --fmad=false>)
set_target_properties(ddpprof_cuda_module PROPERTIES
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_RUNTIME_LIBRARY Shared)

target_include_directories(ddpprof_cuda_module PRIVATE ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
target_link_libraries(ddpprof_cuda_module PRIVATE ddpprof_cuda_check CUDA::cudart ddpprof::cublas
                      ${CUDNN_LIBRARY} ${NCCL_LIBRARY} Threads::Threads m)
message(STATUS "ddpprof: CUDA backend (libddpprof_cuda.so, loaded on first use) links cudart, cuBLAS ${CUBLAS_LIBRARY}, ${CUDNN_LIBRARY}, ${NCCL_LIBRARY}")
