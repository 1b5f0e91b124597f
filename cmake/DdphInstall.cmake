# Install and export the ddph package: headers, every library whose headers it installs
# (ddph::core, ddph::ddp, ddph::train), ddph::ddp-sim, the CMake config with
# DdphSamplerChecks.cmake, the Python line-protocol examples and the audit recorder (python/).
# Consumers:
#   find_package(ddph 0.1 REQUIRED)
#   target_link_libraries(my_tests PRIVATE ddph::core)   # or ddph::ddp, ddph::train
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DDPH_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddph)
set(DDPH_INSTALL_PYTHON_DIR ${CMAKE_INSTALL_DATADIR}/ddph/python)
get_target_property(_ddph_core_type ddph_core TYPE)
if(_ddph_core_type STREQUAL "STATIC_LIBRARY")
  set(DDPH_CORE_STATIC 1)
else()
  set(DDPH_CORE_STATIC 0)
endif()

set_target_properties(ddph_core PROPERTIES EXPORT_NAME core)
set_target_properties(ddph_ddp PROPERTIES EXPORT_NAME ddp)
set_target_properties(ddph_train PROPERTIES EXPORT_NAME train)
install(TARGETS ddph_core ddph_ddp ddph_train ddp-sim
  EXPORT ddph-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The on-demand LibTorch module (NOTE [LibTorch on demand]): installed beside the libraries; a
# consumer's programs find it through the RUNPATH ddph::core gives them.
install(TARGETS ddph_libtorch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
target_link_options(ddph_core INTERFACE
  $<INSTALL_INTERFACE:LINKER:-rpath,$<INSTALL_PREFIX>/${CMAKE_INSTALL_LIBDIR}>)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/ddph
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/core/include/ddph/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddph)
install(EXPORT ddph-targets
  NAMESPACE ddph::
  FILE ddph-targets.cmake
  DESTINATION ${DDPH_INSTALL_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddph-config.cmake.in
  ${PROJECT_BINARY_DIR}/ddph-config.cmake
  INSTALL_DESTINATION ${DDPH_INSTALL_CMAKE_DIR}
  PATH_VARS DDPH_INSTALL_PYTHON_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddph-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/ddph-config.cmake
  ${PROJECT_BINARY_DIR}/ddph-config-version.cmake
  ${PROJECT_SOURCE_DIR}/cmake/DdphSamplerChecks.cmake
  DESTINATION ${DDPH_INSTALL_CMAKE_DIR})
install(PROGRAMS
  ${PROJECT_SOURCE_DIR}/examples/python/torch_sampler.py
  ${PROJECT_SOURCE_DIR}/examples/python/buggy_sampler.py
  DESTINATION ${DDPH_INSTALL_PYTHON_DIR})
