# cmake/config_json.cmake — what this configure found, written to <build>/ddpprof-config.json
# for scripts (scripts/gpu-check reads it rather than CMake's messages): the CUDA toolkit and
# nvcc, the architectures, each dependency's header folder and library ("missing" when not
# found), the optional pieces (oneDNN, Gloo), -Werror, and the folders of the libraries the
# programs need at run time outside the system's (a wheel's, a packed one's).
function(_json_str out value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

# _json_dep(OUT_VAR NAME INCLUDE LIBRARY): "NAME": {"include": ..., "library": ...}
function(_json_dep out name inc lib)
  list(REMOVE_DUPLICATES inc)
  foreach(v inc lib)
    if(NOT ${v} OR ${v} MATCHES "-NOTFOUND$")
      set(${v} missing)
    endif()
  endforeach()
  _json_str(i "${inc}")
  _json_str(l "${lib}")
  set(${out} "${${out}}    \"${name}\": {\"include\": ${i}, \"library\": ${l}},\n" PARENT_SCOPE)
endfunction()

set(_deps "")
_json_dep(_deps libcsv "${CSV_INCLUDE_DIR}" "${CSV_LIBRARY}")
_json_dep(_deps yajl "${YAJL_INCLUDE_DIR}" "${YAJL_LIBRARY}")
_json_dep(_deps openblas "${CBLAS_INCLUDE_DIR}" "${OPENBLAS_LIBRARY}")
_json_dep(_deps zlib "${ZLIB_INCLUDE_DIRS}" "${ZLIB_LIBRARIES}")
_json_dep(_deps cudnn "${CUDNN_INCLUDE_DIR}" "${CUDNN_LIBRARY}")
_json_dep(_deps nccl "${NCCL_INCLUDE_DIR}" "${NCCL_LIBRARY}")
_json_dep(_deps cupti "${CUPTI_INCLUDE_DIR}" "${CUPTI_LIBRARY}")
_json_dep(_deps cublas "${CUBLAS_INCLUDE_DIR}" "${CUBLAS_LIBRARY}")
_json_dep(_deps nvtx3 "${NVTX3_INCLUDE_DIR}" "header-only")
_json_dep(_deps cudart "${CUDAToolkit_INCLUDE_DIRS}" "${CUDA_cudart_LIBRARY}")
string(REGEX REPLACE ",\n$" "\n" _deps "${_deps}")

# folders of the non-system libraries the programs load (LD_LIBRARY_PATH for tools that do
# not read the build's RPATH: compute-sanitizer's children, python, the test scripts)
set(_rt "")
foreach(_lib ${CSV_LIBRARY} ${YAJL_LIBRARY} ${OPENBLAS_LIBRARY} ${CUDNN_LIBRARY} ${NCCL_LIBRARY}
        ${CUPTI_LIBRARY} ${CUBLAS_LIBRARY} ${CUDA_cudart_LIBRARY})
  if(_lib AND NOT _lib MATCHES "-NOTFOUND$" AND IS_ABSOLUTE "${_lib}")
    get_filename_component(_d "${_lib}" DIRECTORY)
    if(NOT _d MATCHES "^/(usr/)?lib(64)?(/x86_64-linux-gnu|/aarch64-linux-gnu)?$")
      list(APPEND _rt "${_d}")
    endif()
  endif()
endforeach()
list(REMOVE_DUPLICATES _rt)
set(_rt_json "")
foreach(_d IN LISTS _rt)
  _json_str(_q "${_d}")
  list(APPEND _rt_json "${_q}")
endforeach()
string(REPLACE ";" ", " _rt_json "${_rt_json}")

set(_wheels_json "")
foreach(_d IN LISTS DDPPROF_NVIDIA_WHEELS)
  _json_str(_q "${_d}")
  list(APPEND _wheels_json "${_q}")
endforeach()
string(REPLACE ";" ", " _wheels_json "${_wheels_json}")

set(_missing_json "")
foreach(_m IN LISTS _missing)
  list(APPEND _missing_json "\"${_m}\"")
endforeach()
string(REPLACE ";" ", " _missing_json "${_missing_json}")
set(_archs "")
if(DDPPROF_HAVE_CUDA)
  set(_archs "${CMAKE_CUDA_ARCHITECTURES}")
endif()
foreach(_v CUDAToolkit_VERSION CUDAToolkit_NVCC_EXECUTABLE CMAKE_CUDA_COMPILER
        CMAKE_CUDA_COMPILER_VERSION CUDAToolkit_BIN_DIR CUDAToolkit_LIBRARY_DIR _archs
        CMAKE_C_COMPILER CMAKE_C_COMPILER_VERSION CMAKE_BUILD_TYPE)
  _json_str(_j_${_v} "${${_v}}")
endforeach()
foreach(_b DDPPROF_HAVE_CUDA DDPPROF_HAVE_DNNL DDPPROF_HAVE_GLOO DDPPROF_WERROR CUDAToolkit_FOUND)
  if(${_b})
    set(_j_${_b} true)
  else()
    set(_j_${_b} false)
  endif()
endforeach()

file(WRITE ${CMAKE_BINARY_DIR}/ddpprof-config.json "{
  \"have_cuda\": ${_j_DDPPROF_HAVE_CUDA},
  \"cuda_toolkit_found\": ${_j_CUDAToolkit_FOUND},
  \"cuda_missing\": [${_missing_json}],
  \"cuda_version\": ${_j_CUDAToolkit_VERSION},
  \"cuda_bin_dir\": ${_j_CUDAToolkit_BIN_DIR},
  \"cuda_library_dir\": ${_j_CUDAToolkit_LIBRARY_DIR},
  \"nvcc\": ${_j_CUDAToolkit_NVCC_EXECUTABLE},
  \"nvcc_version\": ${_j_CMAKE_CUDA_COMPILER_VERSION},
  \"cuda_architectures\": ${_j__archs},
  \"c_compiler\": ${_j_CMAKE_C_COMPILER},
  \"c_compiler_version\": ${_j_CMAKE_C_COMPILER_VERSION},
  \"build_type\": ${_j_CMAKE_BUILD_TYPE},
  \"werror\": ${_j_DDPPROF_WERROR},
  \"dnnl\": ${_j_DDPPROF_HAVE_DNNL},
  \"gloo\": ${_j_DDPPROF_HAVE_GLOO},
  \"nvidia_wheels\": [${_wheels_json}],
  \"runtime_library_dirs\": [${_rt_json}],
  \"deps\": {
${_deps}  }
}
")
message(STATUS "ddpprof: what was found is in ${CMAKE_BINARY_DIR}/ddpprof-config.json")
