# rewrite_launches.cmake — turns CUDA launches into plain C++ calls for the emulation
# (tests/cuda_emu/cuda_emu.h):  kernel<T><<<grid, block, shmem, stream>>>(args)  becomes
# emu_launch(kernel<T>, grid, block, shmem, stream)(args).  Lines stay where they were
# and a #line directive names the original file, so compiler messages point into it.
#   cmake -DIN=trainer/cuda/kernels.cu -DOUT=kernels_emu.cpp -P cmake/rewrite_launches.cmake
# A launch's configuration must not contain '>' (kernels.cu says so).
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "rewrite_launches.cmake: pass -DIN=<file.cu> -DOUT=<file.cpp>")
endif()
file(READ "${IN}" src)
string(REGEX REPLACE "([A-Za-z_][A-Za-z_0-9]*(<[^<>;]*>)?)<<<([^>]*)>>>" "emu_launch(\\1, \\3)"
       out "${src}")
string(FIND "${out}" "<<<" left)
if(NOT left EQUAL -1)
  string(SUBSTRING "${out}" ${left} 80 where)
  message(FATAL_ERROR "rewrite_launches.cmake: a launch in ${IN} was not rewritten: ${where}")
endif()
file(WRITE "${OUT}" "#line 1 \"${IN}\"\n${out}")
