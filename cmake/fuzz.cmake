# cmake/fuzz.cmake — the flags of a fuzzing build (-DDDPPROF_FUZZ=ON), included by the top
# CMakeLists.txt before any target: everything is compiled for libFuzzer's coverage
# (-fsanitize=fuzzer-no-link) under ASan and UBSan, and fuzz/CMakeLists.txt then links the
# fuzz_<name> programs with libFuzzer's main.  clang only (Debian: clang and
# libclang-rt-14-dev; scripts/fuzz makes such a build in build-fuzz/).  Without the option
# only the replay programs are built (with any compiler), and ctest replays the corpora.
option(DDPPROF_FUZZ "Build the libFuzzer targets of fuzz/ (clang; everything instrumented, ASan+UBSan)" OFF)
set(DDPPROF_HAVE_LIBFUZZER OFF)
if(DDPPROF_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DDPPROF_FUZZ needs clang's libFuzzer, but the C compiler is "
                        "${CMAKE_C_COMPILER_ID}: configure with CC=clang (Debian: apt-get "
                        "install clang libclang-rt-14-dev)")
  endif()
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -fsanitize=fuzzer)
  check_c_source_compiles([[
    #include <stddef.h>
    #include <stdint.h>
    int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
  ]] DDPPROF_LIBFUZZER_LINKS)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT DDPPROF_LIBFUZZER_LINKS)
    message(FATAL_ERROR "DDPPROF_FUZZ: clang cannot link -fsanitize=fuzzer (Debian: apt-get "
                        "install libclang-rt-14-dev)")
  endif()
  set(DDPPROF_HAVE_LIBFUZZER ON)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=all -g)
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "ddpprof: fuzzing build: libFuzzer targets under ASan+UBSan")
endif()
