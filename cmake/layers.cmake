# cmake/layers.cmake — the layering of the tree: CMake's usage requirements, nothing else.
#
# Includes are path-qualified from a layer root: "common/error.h", "probes/probe.h",
# "report/input/run.h", and inside the trainer "backend/backend.h", "comm/store.h", "train.h".
# No target is compiled with the source tree (or trainer/) as an include directory.
# Instead every library has an include root of its own, build/include/<library>/, a folder
# of one link per layer it holds (build/include/ddpprof_report_input/report/input ->
# report/input/, build/include/ddpprof_trace_format/probes/trace_format.h -> that one file),
# set as its
# PUBLIC (or INTERFACE) include directory.  A target therefore sees the headers of exactly
# the libraries it links, and of what they link PUBLIC, so
#
#     the dependency graph is the target_link_libraries calls, and only them.
#
# An include that reaches upward (report including a trainer header, data including comm)
# does not compile, and cmake/check_layers.py (ctest test_layers) reads the same graph --
# build/layers.txt, written below from the targets' link properties at the end of the
# configure -- to say which rule an include breaks, including the one kind the roots
# cannot stop: an include the compiler finds beside the file (trainer/main.c including
# "cuda/cuda_api.h" finds trainer/cuda/cuda_api.h):
#
#     report/input/import.c:12: includes "train.h" -- rule: report_input may use only
#     common, trace_format, run_format (report/CMakeLists.txt:
#     target_link_libraries(ddpprof_report_input ...))
#
# The graph today, lowest first (DESIGN.md "Layers"; each line is a target_link_libraries):
#   common                              error, clock, rng, half, vec, plugin loading
#   trace_format (INTERFACE)            probes/trace_format.h alone: what probes write
#   probes     -> common, trace_format, run_format  instrumentation, trace writer, run log
#   run_format (INTERFACE)              probes/run_format.h alone: meta.csv's keys
#   report_input -> common, trace_format, run_format   run directories, importers
#   report_analysis -> report_input     the figures
#   report_output -> report_analysis    tables, terminal, page, charts, timeline, Kineto
#   report     -> report_output (PRIVATE)  report.c, report_cli.c, predict_cli.c: report.h alone
#                                       (the report: never the trainer, never the rest of
#                                       probes; its rooms one way, report/CMakeLists.txt)
#   backend, data, comm -> common
#   launch     -> comm, run_format      launcher, worker environment, node agent (its store)
#   nn         -> backend, comm         layers, models, optimizers, GradScaler
#   ddp        -> nn                    the reducer
#   io         -> nn                    safetensors, checkpoints
#   cuda       -> backend, comm         the loader of libddpprof_cuda.so (cuda/cuda_api.h)
#   device     -> probes, cuda (PRIVATE: the rest of the program cannot include cuda/)
#   trainer    -> device, ddp, io, data, launch   cli, train
#   ddpprof    -> trainer, report       main
# A module loaded by dlopen (ddpprof_module) and the object libraries it is built from use
# the headers of the program's libraries without linking them (ddpprof_use_headers): they
# run on the program's copies (IMPORTS).

set(DDPPROF_TOP_LAYERS common probes report bench tests fuzz)

# the source path of a root entry: a top-level folder, a folder inside one ("report/input":
# a room of the report), a trainer/ folder, or one file ("probes/trace_format.h", "train.h")
function(_ddpprof_layer_source entry out)
  list(FIND DDPPROF_TOP_LAYERS "${entry}" top)
  string(REGEX REPLACE "/.*" "" first "${entry}")
  list(FIND DDPPROF_TOP_LAYERS "${first}" inside)
  if(top GREATER -1 OR (EXISTS ${CMAKE_SOURCE_DIR}/${entry} AND
                        (inside GREATER -1 OR NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${entry})))
    set(${out} ${CMAKE_SOURCE_DIR}/${entry} PARENT_SCOPE)
  elseif(EXISTS ${CMAKE_SOURCE_DIR}/trainer/${entry})
    set(${out} ${CMAKE_SOURCE_DIR}/trainer/${entry} PARENT_SCOPE)
  else()
    message(FATAL_ERROR "layers: no layer '${entry}' (neither ${entry} nor trainer/${entry})")
  endif()
endfunction()

# ddpprof_include_root(TARGET PUBLIC|INTERFACE entry...): TARGET's include root,
# build/include/TARGET/, holding one link per entry; whoever links TARGET sees it.
function(ddpprof_include_root target scope)
  set(dir ${CMAKE_BINARY_DIR}/include/${target})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  foreach(entry ${ARGN})
    _ddpprof_layer_source(${entry} src)
    get_filename_component(parent ${dir}/${entry} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${src} ${dir}/${entry} SYMBOLIC)
  endforeach()
  target_include_directories(${target} ${scope} ${dir})
  set_property(TARGET ${target} PROPERTY DDPPROF_ROOTS ${ARGN})
endfunction()

# ddpprof_library(NAME SOURCES src... [ROOT entry...]): a static library whose include root
# holds ROOT (its own folder, usually).  What it uses: target_link_libraries, PUBLIC where
# its headers include the other library's, PRIVATE where only its .c files do.
function(ddpprof_library name)
  cmake_parse_arguments(L "" "" "SOURCES;ROOT" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  if(L_ROOT)
    ddpprof_include_root(${name} PUBLIC ${L_ROOT})
  endif()
endfunction()

# ddpprof_interface(NAME ROOT entry...): headers only (the trace format)
function(ddpprof_interface name)
  cmake_parse_arguments(L "" "" "ROOT" ${ARGN})
  add_library(${name} INTERFACE)
  ddpprof_include_root(${name} INTERFACE ${L_ROOT})
endfunction()

# ddpprof_use_headers(TARGET lib...): TARGET includes the headers of LIBs (and of what they
# link PUBLIC) without linking them: a module loaded by dlopen, which calls the program's
# own copies (its IMPORTS), and the object libraries it is made of.  Recorded for the
# layer check as any link is.
function(ddpprof_use_headers target)
  set(todo ${ARGN})
  set(seen "")
  while(todo)
    list(POP_FRONT todo lib)
    if(lib IN_LIST seen OR NOT TARGET ${lib})
      continue()
    endif()
    list(APPEND seen ${lib})
    target_include_directories(${target} PRIVATE
                               $<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>)
    get_target_property(imported ${lib} IMPORTED)
    if(NOT imported)
      get_target_property(next ${lib} INTERFACE_LINK_LIBRARIES)
      foreach(n ${next})
        if(NOT n MATCHES "^\\$<")
          list(APPEND todo ${n})
        endif()
      endforeach()
    endif()
  endwhile()
  set_property(TARGET ${target} APPEND PROPERTY DDPPROF_HEADER_USES ${ARGN})
endfunction()

# ddpprof_module(NAME OUTPUT base SOURCES src... IMPORTS sym... LOADER lib): a shared
# object the program loads on first use (common/plugin.h), built as lib<base>.so beside
# the ddpprof binary (build/).  Every symbol in it is hidden but its table, which the
# loader looks up by name.  IMPORTS are the program's functions the module calls back
# (error_set, ...), written here once for both sides: every program linking LOADER (the
# static library that holds its loader) keeps them (-u) and exports exactly them
# (--dynamic-list, build/modules/<base>.imports), so the module runs on the program's own
# copies (one error message per thread, one clock) and nothing else of the program is
# exported.  A module calling a function missing from IMPORTS fails to load, naming it
# (the loader opens it with RTLD_NOW; tests/test_cuda_lazy.c loads both modules), and
# tests/test_cuda_symbols.sh checks the list against the module's undefined symbols.
# The module's headers: ddpprof_use_headers; its libraries: target_link_libraries PRIVATE.
function(ddpprof_module name)
  cmake_parse_arguments(M "" "OUTPUT;LOADER" "SOURCES;IMPORTS" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  set_target_properties(${name} PROPERTIES OUTPUT_NAME ${M_OUTPUT} LINKER_LANGUAGE C
                        C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  set(imports ${CMAKE_BINARY_DIR}/modules/${M_OUTPUT}.imports)
  list(JOIN M_IMPORTS "; " syms)
  file(CONFIGURE OUTPUT ${imports} CONTENT "{ ${syms}; };\n")
  set(opts "LINKER:--dynamic-list=${imports}")
  foreach(sym ${M_IMPORTS})
    list(APPEND opts "LINKER:-u,${sym}")
  endforeach()
  target_link_options(${M_LOADER} INTERFACE ${opts})
  add_dependencies(${M_LOADER} ${name})
endfunction()

# No include may climb out of the layer roots ("../x.h"): the roots would not see it.
file(GLOB_RECURSE _ddpprof_all_sources ${CMAKE_SOURCE_DIR}/common/*.[ch]
     ${CMAKE_SOURCE_DIR}/probes/*.[ch] ${CMAKE_SOURCE_DIR}/report/*.[ch]
     ${CMAKE_SOURCE_DIR}/trainer/*.[ch] ${CMAKE_SOURCE_DIR}/trainer/*.cu
     ${CMAKE_SOURCE_DIR}/tests/*.[ch] ${CMAKE_SOURCE_DIR}/bench/*.[ch]
     ${CMAKE_SOURCE_DIR}/fuzz/*.[ch])
foreach(_src ${_ddpprof_all_sources})
  file(STRINGS ${_src} _bad REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]*\\.\\./")
  if(_bad)
    message(FATAL_ERROR "layers: ${_src} includes through '..' (${_bad}): include from a layer root")
  endif()
endforeach()

# _ddpprof_targets_in(DIR out): every target defined in DIR and below
function(_ddpprof_targets_in dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _ddpprof_targets_in(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# ddpprof_write_layer_table(): build/layers.txt, the graph as the targets state it, for
# cmake/check_layers.py (test_layers).  Called once, at the end of the top CMakeLists.txt.
# One line per fact, tab-separated: target, key, value (a ;-list):
#   dir (where it is defined), roots, links (LINK_LIBRARIES), interface (what a user of it
#   sees: INTERFACE_LINK_LIBRARIES), headers (ddpprof_use_headers), sources
function(ddpprof_write_layer_table)
  _ddpprof_targets_in(${CMAKE_SOURCE_DIR} targets)
  set(out "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    file(RELATIVE_PATH reldir ${CMAKE_SOURCE_DIR} ${dir})
    string(APPEND out "${t}\tdir\t${reldir}\n")
    foreach(key_prop "roots;DDPPROF_ROOTS" "links;LINK_LIBRARIES"
                     "interface;INTERFACE_LINK_LIBRARIES" "headers;DDPPROF_HEADER_USES")
      list(GET key_prop 0 key)
      list(GET key_prop 1 prop)
      if(type STREQUAL "INTERFACE_LIBRARY" AND key STREQUAL "links")
        continue()
      endif()
      get_target_property(v ${t} ${prop})
      if(v)
        string(APPEND out "${t}\t${key}\t${v}\n")
      endif()
    endforeach()
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(srcs ${t} SOURCES)
      set(abs "")
      foreach(s ${srcs})
        if(s MATCHES "^\\$<")
          continue()
        endif()
        get_filename_component(a ${s} ABSOLUTE BASE_DIR ${dir})
        list(APPEND abs ${a})
      endforeach()
      string(APPEND out "${t}\tsources\t${abs}\n")
    endif()
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/layers.txt "${out}")
endfunction()
