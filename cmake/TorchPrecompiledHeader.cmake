# LibTorch's <torch/torch.h>, precompiled once per tree (WORKLOAD_PCH).
#
# Parsing LibTorch's headers is most of a unit's compile time: with clang 14 at -O3, a unit that
# includes nothing else takes about 13 s, and lib/run/trainer.cpp 18 s, 7 s of it its own code
# (docs/BENCHMARKS.md, "CI's time (issue 41, seventh round)"). workload_precompile_torch(), called
# once every target exists, gives each C++ unit that includes a LibTorch header (torch/, ATen/,
# c10/), itself or through the project's own headers, a precompiled <torch/torch.h>, built once
# for the libraries (-fPIC) and once for the executables (-fPIE). The units that include none keep
# their plain command: loading the header would cost them more than it saves.
#
# clang-tidy (scripts/dev/check_tidy.sh) checks the units without it: each must include what it
# uses, and a WORKLOAD_PCH=OFF build (gcc's, by default) compiles them as they are.

# A precompiled header is compiler-specific; clang's is measured, and clang builds CI's Release
# tree. The sanitizer trees build few LibTorch units: a header of their own would not pay.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND WORKLOAD_SANITIZE STREQUAL "")
  set(_workload_pch_default ON)
else()
  set(_workload_pch_default OFF)
endif()
option(WORKLOAD_PCH "Precompile LibTorch's <torch/torch.h> for the units that include LibTorch"
       ${_workload_pch_default})

# _workload_reads_torch(<file> <out-var>): ON when <file> includes a LibTorch header, itself or
# through a project header ("..." includes resolved from the file's folder, then the project's
# root). Each file is read once per configure (a global property remembers the answer).
function(_workload_reads_torch file out)
  get_property(known GLOBAL PROPERTY "_workload_torch:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "_workload_torch:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "_workload_torch:${file}" OFF)  # a cycle of includes ends here
  set(answer OFF)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(folder "${file}" DIRECTORY)
  foreach(line IN LISTS includes)
    if(line MATCHES "<(torch|ATen|c10)/")
      set(answer ON)
      break()
    endif()
    if(line MATCHES "\"([^\"]+)\"")
      set(header "")
      foreach(base "${folder}" "${PROJECT_SOURCE_DIR}")
        if(header STREQUAL "" AND EXISTS "${base}/${CMAKE_MATCH_1}")
          set(header "${base}/${CMAKE_MATCH_1}")
        endif()
      endforeach()
      if(NOT header STREQUAL "")
        _workload_reads_torch("${header}" nested)
        if(nested)
          set(answer ON)
          break()
        endif()
      endif()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "_workload_torch:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# _workload_targets(<dir> <out-var>): the targets defined in <dir> and the folders below it.
function(_workload_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _workload_targets("${sub}" below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# workload_precompile_torch(): with WORKLOAD_PCH, the precompiled header for every target that has
# a LibTorch unit; call it at the end of the top-level CMakeLists.txt, once every target exists.
function(workload_precompile_torch)
  if(NOT WORKLOAD_PCH)
    return()
  endif()
  # The two owners: same flags as their users (workload_options, LibTorch's usage requirements),
  # one position-independent for libraries, one for executables.
  set(source "${PROJECT_BINARY_DIR}/workload_torch_pch.cpp")
  file(CONFIGURE OUTPUT "${source}" CONTENT "int main() { return 0; }\n")
  add_library(workload_torch_pch OBJECT "${source}")
  add_executable(workload_torch_pch_exe "${source}")
  foreach(owner workload_torch_pch workload_torch_pch_exe)
    target_link_libraries(${owner} PRIVATE workload_options ${TORCH_LIBRARIES})
    target_precompile_headers(${owner} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<torch/torch.h$<ANGLE-R>>")
  endforeach()
  set(users 0)
  set(units 0)
  _workload_targets("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(target MATCHES "^workload_torch_pch" OR
       NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    set(with)
    set(without)
    foreach(src IN LISTS sources)
      if(IS_ABSOLUTE "${src}")
        set(path "${src}")
      else()
        set(path "${source_dir}/${src}")
      endif()
      set(reads OFF)
      if(src MATCHES "\\.(cpp|cc|cxx)$")  # CUDA and the rest keep their commands
        _workload_reads_torch("${path}" reads)
      endif()
      if(reads)
        list(APPEND with "${path}")
      else()
        list(APPEND without "${path}")
      endif()
    endforeach()
    if(NOT with)
      continue()
    endif()
    if(type STREQUAL "EXECUTABLE")
      set_property(TARGET ${target} PROPERTY PRECOMPILE_HEADERS_REUSE_FROM workload_torch_pch_exe)
    else()
      set_property(TARGET ${target} PROPERTY PRECOMPILE_HEADERS_REUSE_FROM workload_torch_pch)
    endif()
    if(without)
      set_source_files_properties(${without} TARGET_DIRECTORY ${target}
                                  PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
    list(LENGTH with n)
    math(EXPR units "${units} + ${n}")
    math(EXPR users "${users} + 1")
  endforeach()
  message(STATUS "workload: <torch/torch.h> precompiled for ${units} units of ${users} targets "
                 "(WORKLOAD_PCH)")
endfunction()
