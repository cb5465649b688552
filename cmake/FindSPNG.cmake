# FindSPNG: libspng (libspng-dev) as the imported target SPNG::spng.
# libspng ships a pkg-config file but no CMake package.
# Used by Strata's own build and installed beside StrataConfig.cmake for find_dependency(SPNG).
find_path(SPNG_INCLUDE_DIR spng.h)
find_library(SPNG_LIBRARY spng)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SPNG REQUIRED_VARS SPNG_LIBRARY SPNG_INCLUDE_DIR)
if(SPNG_FOUND AND NOT TARGET SPNG::spng)
  add_library(SPNG::spng UNKNOWN IMPORTED)
  set_target_properties(SPNG::spng PROPERTIES IMPORTED_LOCATION "${SPNG_LIBRARY}"
                                           INTERFACE_INCLUDE_DIRECTORIES "${SPNG_INCLUDE_DIR}")
endif()
mark_as_advanced(SPNG_INCLUDE_DIR SPNG_LIBRARY)
