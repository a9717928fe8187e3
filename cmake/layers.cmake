# cmake/layers.cmake — the layering of the tree, enforced by the build.
#
# Includes are path-qualified from a layer root: "common/error.h", "probes/probe.h",
# "report/run.h", and inside the trainer "backend/backend.h", "comm/store.h", "train.h".
# No target is compiled with the source tree (or trainer/) as an include directory.
# Instead each target gets its own folder under build/layers/<target>/ holding symlinks to
# exactly the layers it may use (ddpprof_layers below), so an include that reaches upward
# (report including a trainer header, data including comm, ...) is "No such file" at
# compile time.  A test may include what the libraries it links may include.
#
# The allowed uses, lowest first (DESIGN.md "Layers"):
#   common                              error, clock, rng, half, vec, CUDA check macros
#   probes     -> common                instrumentation, trace format, run log
#   report     -> common, probes/trace_format.h   (never the trainer)
#   backend, data, comm -> common
#   launch     -> comm                  launcher, worker environment, node agent (its store)
#   nn         -> backend, comm         layers, models, optimizers, GradScaler
#   ddp        -> nn                    the reducer
#   io         -> nn                    safetensors, checkpoints
#   cuda       -> backend, comm         CUDA backend, NCCL comm
#   trainer    -> everything            cli, train, device, main
#   fuzz       -> what its target parses  fuzz targets and their replay driver (fuzz/)

set(DDPPROF_TOP_LAYERS common probes report bench tests fuzz)

# the source path of a layer entry: a top-level folder, a trainer/ folder, or one file
# ("probes/trace_format.h", "train.h")
function(_ddpprof_layer_source entry out)
  list(FIND DDPPROF_TOP_LAYERS "${entry}" top)
  if(top GREATER -1 OR (EXISTS ${CMAKE_SOURCE_DIR}/${entry} AND
                        NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${entry}))
    set(${out} ${CMAKE_SOURCE_DIR}/${entry} PARENT_SCOPE)
  elseif(EXISTS ${CMAKE_SOURCE_DIR}/trainer/${entry})
    set(${out} ${CMAKE_SOURCE_DIR}/trainer/${entry} PARENT_SCOPE)
  else()
    message(FATAL_ERROR "layers: no layer '${entry}' (neither ${entry} nor trainer/${entry})")
  endif()
endfunction()

# ddpprof_layers(TARGET entry...): TARGET may include from exactly these layers.
function(ddpprof_layers target)
  set(dir ${CMAKE_BINARY_DIR}/layers/${target})
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  list(REMOVE_DUPLICATES ARGN)
  # a file entry inside a folder entry is covered by it: "probes" covers
  # "probes/trace_format.h" (a test linking both ddpprof_report and ddpprof_probes)
  set(entries ${ARGN})
  foreach(entry ${ARGN})
    string(FIND "${entry}" "/" slash)
    if(slash GREATER 0)
      string(SUBSTRING "${entry}" 0 ${slash} top)
      if(top IN_LIST entries)
        list(REMOVE_ITEM entries "${entry}")
      endif()
    endif()
  endforeach()
  foreach(entry ${entries})
    _ddpprof_layer_source(${entry} src)
    get_filename_component(parent ${dir}/${entry} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${src} ${dir}/${entry} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PRIVATE ${dir})
  set_property(TARGET ${target} PROPERTY DDPPROF_LAYERS ${entries})
endfunction()

# ddpprof_library(NAME SOURCES src... LAYERS entry... LINK lib...): a static library that
# may include LAYERS (its own folder among them) and links LINK publicly.
function(ddpprof_library name)
  cmake_parse_arguments(L "" "" "SOURCES;LAYERS;LINK" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  ddpprof_layers(${name} ${L_LAYERS})
  if(L_LINK)
    target_link_libraries(${name} PUBLIC ${L_LINK})
  endif()
endfunction()

# ddpprof_module(NAME OUTPUT base SOURCES src... LAYERS entry... LINK lib... IMPORTS sym...
#                LOADER lib): a shared object the program loads on first use
# (common/plugin.h), built as lib<base>.so beside the ddpprof binary (build/).  Every
# symbol in it is hidden but its table, which the loader looks up by name.  IMPORTS are
# the program's functions the module calls back (error_set, ...): every program linking
# LOADER (the static library that holds its loader) keeps them (-u) and exports exactly
# them (--dynamic-list), so the module runs on the program's own copies (one error
# message per thread, one clock) and nothing else of the program is exported.  A module
# calling a function missing from IMPORTS fails to load, naming it (the loader opens it
# with RTLD_NOW; tests/test_cuda_lazy.c loads both modules).
function(ddpprof_module name)
  cmake_parse_arguments(M "" "OUTPUT;LOADER" "SOURCES;LAYERS;LINK;IMPORTS" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  ddpprof_layers(${name} ${M_LAYERS})
  set_target_properties(${name} PROPERTIES OUTPUT_NAME ${M_OUTPUT} LINKER_LANGUAGE C
                        C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_link_libraries(${name} PRIVATE ${M_LINK})
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

# the layers a target may include: those of the ddpprof libraries it links directly
function(ddpprof_layers_of out)
  set(all "")
  foreach(lib ${ARGN})
    if(TARGET ${lib})
      get_property(l TARGET ${lib} PROPERTY DDPPROF_LAYERS)
      list(APPEND all ${l})
    endif()
  endforeach()
  set(${out} ${all} PARENT_SCOPE)
endfunction()

# No include may climb out of the layer roots ("../x.h"): the symlinks above would not see it.
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
