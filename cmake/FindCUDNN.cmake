# FindCUDNN: cuDNN's headers and library, for lib/model/cudnn_bn (--fused-bn).
#
# Looks first beside the LibTorch found (a PyTorch wheel's site-packages/nvidia/cudnn, the cuDNN it
# loads), then in CUDNN_ROOT / $ENV{CUDNN_ROOT}, the CUDA toolkit and the system. The header must be
# that of the library LibTorch loads: set CUDNN_ROOT when several are installed.
#
# Defines CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, CUDNN_VERSION ("9.14.0") and the imported
# target CUDNN::cudnn.
set(_cudnn_hints)
if(CUDNN_ROOT)
  list(APPEND _cudnn_hints "${CUDNN_ROOT}")
endif()
if(DEFINED ENV{CUDNN_ROOT})
  list(APPEND _cudnn_hints "$ENV{CUDNN_ROOT}")
endif()
if(TORCH_INSTALL_PREFIX)
  list(APPEND _cudnn_hints "${TORCH_INSTALL_PREFIX}/../nvidia/cudnn")
endif()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _cudnn_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()

find_path(CUDNN_INCLUDE_DIR cudnn_version.h
          HINTS ${_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
# Wheels ship only the versioned name (libcudnn.so.9).
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
             HINTS ${_cudnn_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
unset(_cudnn_hints)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_defs
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX REPLACE ".*#define CUDNN_${_part} +([0-9]+).*" "\\1" _cudnn_${_part} "${_cudnn_defs}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
  unset(_cudnn_defs)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
