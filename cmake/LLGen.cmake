# LLGen.cmake -- generate ll_codegen layout-conversion headers at build time.
#
#   list(APPEND CMAKE_MODULE_PATH "<ll_codegen checkout>/cmake")
#   include(LLGen)
#
#   add_executable(my_kernel my_kernel.cu)
#   llgen_convert(my_kernel
#                 SRC specs/blocked.yaml DST specs/mma.yaml DTYPE f16
#                 [NAME blocked_to_mma]          # default: <src stem>_to_<dst stem>, as llgen names it
#                 [ARCH sm_90]                   # sm_80/86/89/90 (CUDA) or gfx90a/gfx940/gfx942/gfx1030/gfx1100 (HIP)
#                 [STRATEGY auto]                # --strategy
#                 [OPTIONS --swizzle none ...]   # any further `llgen convert` options, passed as they are
#                 [OUTPUT_VARIABLE var])         # set to the header's path
#
#   llgen_mma(my_kernel                           # `llgen mma`: acc += A * B over one tile
#             ACC specs/acc.yaml A specs/a.yaml B specs/b.yaml DTYPE f16
#             [ACC_DTYPE f32] [NAME gemm_mma] [ARCH sm_90a] [OPTIONS ...] [OUTPUT_VARIABLE var])
#
# At build time this runs
#   llgen convert --src SRC --dst DST --dtype DTYPE [--target cuda|hip --arch ARCH] [--strategy S] OPTIONS
#                 --emit header --name NAME -o ${CMAKE_CURRENT_BINARY_DIR}/llgen
# (from ${CMAKE_CURRENT_SOURCE_DIR}, where relative SRC/DST are read), writing NAME.cuh (CUDA) or NAME.h
# (HIP, an ARCH starting with gfx) whenever a spec file changes; the header is made before <target>
# compiles, and ${CMAKE_CURRENT_BINARY_DIR}/llgen is a PRIVATE include directory of <target>, so its
# sources `#include "NAME.cuh"`.  Call it after add_executable/add_library.
#
#   llgen_manifest(my_kernel                      # a checkout's manifest entries, in one llgen run
#                  MANIFEST ../generated/manifest.yaml
#                  [ONLY "^attention_"]           # the entries whose --name matches (default: all)
#                  [DEPENDS ../specs ...])        # folders (their *.yaml) or files whose change reruns it
# runs `llgen regenerate --manifest MANIFEST [--only ONLY] -o ${CMAKE_CURRENT_BINARY_DIR}/llgen` (the
# entries' headers and harnesses; their spec paths are relative to the checkout holding the manifest)
# before <target> compiles, and again when the manifest or a DEPENDS spec changes.
#
# The command: LLGEN_EXECUTABLE (a cache variable: the path of `llgen`, or a command list such as
# "/usr/bin/python3;/path/to/ll_codegen/cli.py"); found on PATH when not set, else
# `${Python3_EXECUTABLE} -m ll_codegen` (the Python with ll_codegen installed).
#
# Needs CMake 3.17 or newer.
include_guard(GLOBAL)

find_program(LLGEN_EXECUTABLE llgen DOC "llgen command (a path, or a list: interpreter;script)")

function(_llgen_command out)
  if(LLGEN_EXECUTABLE)
    set(${out} ${LLGEN_EXECUTABLE} PARENT_SCOPE)
    return()
  endif()
  if(NOT Python3_EXECUTABLE)
    find_package(Python3 COMPONENTS Interpreter)
  endif()
  if(NOT Python3_EXECUTABLE)
    message(FATAL_ERROR "llgen_convert: no `llgen` on PATH and no Python 3; pip install ll_codegen, "
                        "or set LLGEN_EXECUTABLE (or Python3_EXECUTABLE)")
  endif()
  set(${out} ${Python3_EXECUTABLE} -m ll_codegen PARENT_SCOPE)
endfunction()

# <stem>_to_<stem> made a C identifier, as llgen's default --name (ll_codegen.api.default_name)
function(_llgen_stem path out)
  get_filename_component(stem "${path}" NAME_WLE)
  string(REGEX REPLACE "[^A-Za-z0-9_]" "_" stem "${stem}")
  if(stem STREQUAL "")
    set(stem layout)
  endif()
  set(${out} "${stem}" PARENT_SCOPE)
endfunction()

# The checks every llgen_* function makes of its parsed arguments (LL_*, in the caller's scope: a
# macro): no unknown ones, the required ones (ARGN) given, <target> a target already.
macro(_llgen_check fn target)
  if(LL_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${fn}(${target}): unknown arguments: ${LL_UNPARSED_ARGUMENTS}")
  endif()
  foreach(req ${ARGN})
    if(NOT LL_${req})
      message(FATAL_ERROR "${fn}(${target}): ${req} is required")
    endif()
  endforeach()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${fn}(${target}): no such target (call it after add_executable/add_library)")
  endif()
endmacro()

# The custom command writing NAME.EXT into ${CMAKE_CURRENT_BINARY_DIR}/llgen before <target> builds:
# `llgen ARGS... --emit header --name NAME -o DIR`, rerun when one of SPECS (relative paths: from
# ${CMAKE_CURRENT_SOURCE_DIR}) changes; OUTVAR (if not empty) is set to the header's path.
function(_llgen_header target name ext outvar comment specs)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/llgen")
  set(header "${dir}/${name}.${ext}")
  set(deps "")
  foreach(spec IN LISTS specs)
    get_filename_component(abs "${spec}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND deps "${abs}")
  endforeach()
  _llgen_command(cmd)
  add_custom_command(
    OUTPUT "${header}"
    COMMAND ${cmd} ${ARGN} --emit header --name "${name}" -o "${dir}"
    DEPENDS ${deps}
    WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
    COMMENT "llgen: ${name}.${ext} (${comment})"
    VERBATIM)
  add_custom_target(llgen_${target}_${name} DEPENDS "${header}")
  add_dependencies(${target} llgen_${target}_${name})
  target_include_directories(${target} PRIVATE "${dir}")
  if(outvar)
    set(${outvar} "${header}" PARENT_SCOPE)
  endif()
endfunction()

function(llgen_convert target)
  cmake_parse_arguments(PARSE_ARGV 1 LL "" "SRC;DST;DTYPE;NAME;ARCH;STRATEGY;OUTPUT_VARIABLE" "OPTIONS")
  _llgen_check(llgen_convert ${target} SRC DST DTYPE)

  if(NOT LL_NAME)
    _llgen_stem("${LL_SRC}" s)
    _llgen_stem("${LL_DST}" d)
    set(LL_NAME "${s}_to_${d}")
    if(LL_NAME MATCHES "^([0-9]|__|_[A-Z])")
      set(LL_NAME "cvt_${LL_NAME}")
    endif()
  endif()

  set(args convert --src "${LL_SRC}" --dst "${LL_DST}" --dtype "${LL_DTYPE}")
  set(ext cuh)
  if(LL_ARCH)
    if(LL_ARCH MATCHES "^gfx")
      list(APPEND args --target hip)
      set(ext h)
    else()
      list(APPEND args --target cuda)
    endif()
    list(APPEND args --arch "${LL_ARCH}")
  endif()
  if(LL_STRATEGY)
    list(APPEND args --strategy "${LL_STRATEGY}")
  endif()
  _llgen_header(${target} "${LL_NAME}" ${ext} "${LL_OUTPUT_VARIABLE}" "${LL_SRC} -> ${LL_DST}, ${LL_DTYPE}"
                "${LL_SRC};${LL_DST}" ${args} ${LL_OPTIONS})
  if(LL_OUTPUT_VARIABLE)
    set(${LL_OUTPUT_VARIABLE} "${${LL_OUTPUT_VARIABLE}}" PARENT_SCOPE)
  endif()
endfunction()

function(llgen_mma target)
  cmake_parse_arguments(PARSE_ARGV 1 LL "" "ACC;A;B;DTYPE;ACC_DTYPE;NAME;ARCH;OUTPUT_VARIABLE" "OPTIONS")
  _llgen_check(llgen_mma ${target} ACC A B DTYPE)
  if(NOT LL_NAME)
    set(LL_NAME mma)
  endif()
  set(args mma --acc "${LL_ACC}" --a "${LL_A}" --b "${LL_B}" --dtype "${LL_DTYPE}")
  if(LL_ACC_DTYPE)
    list(APPEND args --acc-dtype "${LL_ACC_DTYPE}")
  endif()
  if(LL_ARCH)
    list(APPEND args --target cuda --arch "${LL_ARCH}")
  endif()
  _llgen_header(${target} "${LL_NAME}" cuh "${LL_OUTPUT_VARIABLE}" "acc ${LL_ACC} += ${LL_A} * ${LL_B}, ${LL_DTYPE}"
                "${LL_ACC};${LL_A};${LL_B}" ${args} ${LL_OPTIONS})
  if(LL_OUTPUT_VARIABLE)
    set(${LL_OUTPUT_VARIABLE} "${${LL_OUTPUT_VARIABLE}}" PARENT_SCOPE)
  endif()
endfunction()

function(llgen_manifest target)
  cmake_parse_arguments(PARSE_ARGV 1 LL "" "MANIFEST;ONLY" "DEPENDS")
  _llgen_check(llgen_manifest ${target} MANIFEST)
  get_filename_component(manifest "${LL_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(deps "${manifest}")
  foreach(dep IN LISTS LL_DEPENDS)
    get_filename_component(abs "${dep}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(IS_DIRECTORY "${abs}")
      file(GLOB specs CONFIGURE_DEPENDS "${abs}/*.yaml")
      list(APPEND deps ${specs})
    else()
      list(APPEND deps "${abs}")
    endif()
  endforeach()
  set(only "")
  if(DEFINED LL_ONLY)
    set(only --only "${LL_ONLY}")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/llgen")
  set(stamp "${dir}/llgen_manifest_${target}.stamp")
  _llgen_command(cmd)
  add_custom_command(
    OUTPUT "${stamp}"
    COMMAND ${cmd} regenerate --manifest "${manifest}" ${only} -o "${dir}"
    COMMAND ${CMAKE_COMMAND} -E touch "${stamp}"
    DEPENDS ${deps}
    COMMENT "llgen: ${LL_MANIFEST} ${LL_ONLY}"
    VERBATIM)
  add_custom_target(llgen_${target}_manifest DEPENDS "${stamp}")
  add_dependencies(${target} llgen_${target}_manifest)
  target_include_directories(${target} PRIVATE "${dir}")
endfunction()
