# FindTurboJPEG: the TurboJPEG API of libjpeg-turbo (libturbojpeg0-dev) as the imported target TurboJPEG::turbojpeg.
# One name on every distribution: libjpeg-turbo's own CMake package exists only in some builds of
# it.
# Used by Strata's own build and installed beside StrataConfig.cmake for find_dependency(TurboJPEG).
find_path(TurboJPEG_INCLUDE_DIR turbojpeg.h)
find_library(TurboJPEG_LIBRARY turbojpeg)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(TurboJPEG REQUIRED_VARS TurboJPEG_LIBRARY TurboJPEG_INCLUDE_DIR)
if(TurboJPEG_FOUND AND NOT TARGET TurboJPEG::turbojpeg)
  add_library(TurboJPEG::turbojpeg UNKNOWN IMPORTED)
  set_target_properties(TurboJPEG::turbojpeg PROPERTIES IMPORTED_LOCATION "${TurboJPEG_LIBRARY}"
                                           INTERFACE_INCLUDE_DIRECTORIES "${TurboJPEG_INCLUDE_DIR}")
endif()
mark_as_advanced(TurboJPEG_INCLUDE_DIR TurboJPEG_LIBRARY)
