# FindDNNL: oneDNN (libdnnl-dev) as the imported target DNNL::dnnl.
# Debian's own dnnl-config.cmake requires OpenCL (oneDNN 2.6 there is built with the OpenCL
# runtime), which Strata never uses, so this plain search replaces it.
# Used by Strata's own build and installed beside StrataConfig.cmake for find_dependency(DNNL).
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY dnnl)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR)
if(DNNL_FOUND AND NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                                           INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
mark_as_advanced(DNNL_INCLUDE_DIR DNNL_LIBRARY)
