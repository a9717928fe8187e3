# cmake/cuda_deps.cmake — cuDNN, NCCL, CUPTI and cuBLAS for the CUDA build, included from the
# root CMakeLists.txt once CUDAToolkit is found.  Each is looked for, in order, where the
# system and the toolkit keep it, then among python3's pip wheels -- the layout of a machine
# whose CUDA libraries came with PyTorch:
#   nvidia/cudnn/{include,lib}   nvidia-cudnn-cu13   libcudnn.so.9
#   nvidia/nccl/{include,lib}    nvidia-nccl-cu13    libnccl.so.2
#   nvidia/cu13/{include,lib}    nvidia-cuda-cupti, nvidia-cublas (CUDA 13 wheels):
#                                libcupti.so.13, libcublas.so.13, libcublasLt.so.13
#   nvidia/cuda_cupti, nvidia/cublas  the same for CUDA 12 wheels
# The wheels have versioned names only (no lib<name>.so link), so the versioned names are
# asked for explicitly.  Last, DDPPROF_FALLBACK_INCLUDE (scripts/gpu-check --prepare packs
# cuDNN's and NCCL's headers there, for wheels that ship libraries only).
# Sets CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, NCCL_INCLUDE_DIR, NCCL_LIBRARY and the imported
# targets ddpprof::cupti and ddpprof::cublas (CMake's CUDA::cupti / CUDA::cublas where the
# toolkit has them, else the wheels' files); DDPPROF_NVIDIA_WHEELS lists the wheels' nvidia/
# folders that were searched.
set(DDPPROF_FALLBACK_INCLUDE "" CACHE PATH
    "Last place to look for cudnn.h and nccl.h (scripts/gpu-check passes the packed headers)")

# python3's nvidia/ folders (a namespace package: one per site-packages holding a wheel)
set(DDPPROF_NVIDIA_WHEELS "")
find_program(DDPPROF_PYTHON3 NAMES python3)
if(DDPPROF_PYTHON3)
  execute_process(
    COMMAND ${DDPPROF_PYTHON3} -c
      "import sys\ntry:\n    import nvidia\n    print(';'.join(list(nvidia.__path__)))\nexcept Exception:\n    pass"
    OUTPUT_VARIABLE DDPPROF_NVIDIA_WHEELS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
    TIMEOUT 60)
endif()

set(_cuda_major ${CUDAToolkit_VERSION_MAJOR})
# _wheel_dirs(OUT SUB...): <nvidia>/<sub> for every wheels' folder and each SUB
function(_wheel_dirs out)
  set(dirs "")
  foreach(base IN LISTS DDPPROF_NVIDIA_WHEELS)
    foreach(sub IN LISTS ARGN)
      list(APPEND dirs "${base}/${sub}")
    endforeach()
  endforeach()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

_wheel_dirs(_cudnn_inc cudnn/include)
_wheel_dirs(_cudnn_lib cudnn/lib)
_wheel_dirs(_nccl_inc nccl/include)
_wheel_dirs(_nccl_lib nccl/lib)
_wheel_dirs(_cu_inc cu${_cuda_major}/include cuda_cupti/include cublas/include)
_wheel_dirs(_cu_lib cu${_cuda_major}/lib cuda_cupti/lib cublas/lib)

find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cudnn_inc}
          PATHS ${DDPPROF_FALLBACK_INCLUDE})
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${_cudnn_lib})
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_nccl_inc}
          PATHS ${DDPPROF_FALLBACK_INCLUDE})
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ${_nccl_lib})

# _cuda_lib_target(NAME TOOLKIT_TARGET HEADER LIBS...): ddpprof::NAME, from the toolkit's
# target when CMake made one, else HEADER and LIBS (versioned names included) found in the
# toolkit or the wheels.  <NAME>_LIBRARY and <NAME>_INCLUDE_DIR say which files it is.
function(_cuda_lib_target name toolkit_target header)
  string(TOUPPER ${name} up)
  if(TARGET ${toolkit_target})
    get_target_property(loc ${toolkit_target} IMPORTED_LOCATION)
    get_target_property(inc ${toolkit_target} INTERFACE_INCLUDE_DIRECTORIES)
    set(${up}_LIBRARY "${loc}" CACHE FILEPATH "${name} (CMake's ${toolkit_target})" FORCE)
    set(${up}_INCLUDE_DIR "${inc}" CACHE PATH "${name} headers" FORCE)
    add_library(ddpprof::${name} INTERFACE IMPORTED GLOBAL)
    set_target_properties(ddpprof::${name} PROPERTIES INTERFACE_LINK_LIBRARIES ${toolkit_target})
    return()
  endif()
  find_path(${up}_INCLUDE_DIR ${header} HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_cu_inc})
  set(libs "")
  foreach(lib IN LISTS ARGN)
    string(TOUPPER ${lib} lup)
    find_library(${lup}_WHEEL_LIBRARY NAMES ${lib} lib${lib}.so.${_cuda_major}
                 HINTS ${CUDAToolkit_LIBRARY_DIR} ${_cu_lib})
    if(NOT ${lup}_WHEEL_LIBRARY)
      return()
    endif()
    list(APPEND libs ${${lup}_WHEEL_LIBRARY})
  endforeach()
  if(NOT ${up}_INCLUDE_DIR)
    return()
  endif()
  list(GET libs 0 first)
  set(${up}_LIBRARY "${first}" CACHE FILEPATH "${name}" FORCE)
  add_library(ddpprof::${name} INTERFACE IMPORTED GLOBAL)
  set_target_properties(ddpprof::${name} PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}"
                        INTERFACE_INCLUDE_DIRECTORIES ${${up}_INCLUDE_DIR})
endfunction()

_cuda_lib_target(cupti CUDA::cupti cupti.h cupti)
_cuda_lib_target(cublas CUDA::cublas cublas_v2.h cublas cublasLt)
