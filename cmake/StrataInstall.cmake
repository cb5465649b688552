# Strata as an installable dependency: `cmake --install BUILD --prefix P` and `make package`.
# Included from the top CMakeLists.txt after the library and the command are defined.
# docs/install.md describes what lands where; tests/install/ checks it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ---- the public API ---------------------------------------------------------------------
# The headers a user of keras/model.h, data/dataset.h, the record readers and writers,
# distribute/strategy.h and the dataset recipes includes, plus every Strata header those
# include (closed under #include: the install test compiles each installed header on its own
# against the prefix, so an internal header reached from this list fails it). Paths are
# relative to src/strata. The generated strata/core/version.h is added below.
set(STRATA_PUBLIC_HEADERS
  core/dtype.h core/shape.h core/status.h core/tensor.h core/file.h core/cpu.h core/peak_flops.h
  io/file_system.h
  record/tfrecord_format.h record/record_reader.h record/record_writer.h record/example.h
  record/example_parser.h record/event.h
  data/dataset.h data/element.h data/rng.h data/stats.h data/sources.h
  graph/graph.h
  backend/compile.h
  distribute/strategy.h distribute/cluster_resolver.h distribute/collective.h
  distribute/cross_replica_sum.h distribute/reducer.h
  datasets/batch_size.h datasets/fashion_mnist.h datasets/flowers.h datasets/synthetic.h
  datasets/make_records.h
  keras/model.h keras/layer.h keras/layers.h keras/losses.h keras/metrics.h keras/optimizers.h
  keras/schedules.h keras/callbacks.h keras/checkpoint.h keras/spec.h keras/step_observer.h
  keras/applications/applications.h keras/onnx_export.h keras/h5_weights.h
  train/recipe.h train/reporter.h train/trainer.h)
foreach(header ${STRATA_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/src/strata/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata/${dir} COMPONENT dev)
endforeach()
install(FILES ${STRATA_PUBLIC_GENERATED}/strata/core/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata/core COMPONENT dev)

# ---- the library and the command ----------------------------------------------------------
# Static: libstrata.a (dev). Shared: libstrata.so.MAJOR.MINOR (runtime) with its SONAME, and
# the libstrata.so link (dev). Either is exported as Strata::strata.
install(TARGETS ${STRATA_INSTALLED_LIBRARY} EXPORT StrataTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS strata_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md ${CMAKE_SOURCE_DIR}/BENCHMARKS.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

# ---- find_package(Strata) -----------------------------------------------------------------
set(STRATA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Strata)
install(EXPORT StrataTargets NAMESPACE Strata:: DESTINATION ${STRATA_CMAKE_DIR} COMPONENT dev)
if(BUILD_SHARED_LIBS)
  set(BUILD_SHARED_LIBS_BOOL TRUE)
else()
  set(BUILD_SHARED_LIBS_BOOL FALSE)
endif()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/StrataConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/StrataConfig.cmake INSTALL_DESTINATION ${STRATA_CMAKE_DIR})
# 0.x: a new minor version may change the API, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/StrataConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/StrataConfig.cmake ${CMAKE_BINARY_DIR}/StrataConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/FindDNNL.cmake ${CMAKE_SOURCE_DIR}/cmake/FindSPNG.cmake
              ${CMAKE_SOURCE_DIR}/cmake/FindTurboJPEG.cmake
        DESTINATION ${STRATA_CMAKE_DIR} COMPONENT dev)

# ---- pkg-config --cflags --libs strata ----------------------------------------------------
# The dependencies' own .pc names (Debian's); oneDNN ships none, so -ldnnl. A static
# libstrata.a needs them all on the link line; a shared libstrata.so records them itself.
set(STRATA_PC_DEPS "zlib libcurl libcrypto libturbojpeg spng mpi-c hdf5")
if(BUILD_SHARED_LIBS)
  set(STRATA_PC_REQUIRES "")
  set(STRATA_PC_REQUIRES_PRIVATE "${STRATA_PC_DEPS}")
  set(STRATA_PC_LIBS "")
  set(STRATA_PC_LIBS_PRIVATE "-ldnnl -pthread")
else()
  set(STRATA_PC_REQUIRES "${STRATA_PC_DEPS}")
  set(STRATA_PC_REQUIRES_PRIVATE "")
  set(STRATA_PC_LIBS "-ldnnl -pthread")
  set(STRATA_PC_LIBS_PRIVATE "")
endif()
# ${pcfiledir} climbs from LIBDIR/pkgconfig back to the prefix, so the file works wherever
# the tree is unpacked (dpkg-deb -x into a scratch folder, or a relocated prefix).
file(RELATIVE_PATH STRATA_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/strata.pc.in ${CMAKE_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/strata.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- make package: strata_<version>_amd64.deb and strata-dev_<version>_amd64.deb ----------
# cpack installs from the build tree as it is: `make package` builds the two installed
# targets first, and installing does not rebuild the whole tree (tests, benchmarks).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME strata)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Strata")
set(CPACK_PACKAGE_CONTACT "Strata maintainers <strata@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "train neural networks on CPU cores: TFRecord pipelines, Keras-style models")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # a few seconds in make test, against a minute for xz
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME strata)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "train neural networks on CPU cores: the strata command\n The TensorFlow/Keras TPU workflow (TFRecord shards, a replicated model, compile/fit, a monitor) in C++ on oneDNN.")
# Depends of the runtime package: the Debian run-time packages of the libraries the binary
# (and libstrata.so) link, found by dpkg-shlibdeps from the ELF files themselves.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME strata-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "Strata's C++ headers, library, CMake package (find_package(Strata)) and strata.pc\n Build your own programs on Strata's TFRecord reader, pipeline and trainer.")
# Linking a program against Strata needs the -dev packages of what Strata links.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "strata (= ${PROJECT_VERSION}), libdnnl-dev, libopenmpi-dev, libturbojpeg0-dev, libspng-dev, zlib1g-dev, libcurl4-openssl-dev, libssl-dev, libhdf5-dev, pkg-config")
include(CPack)
