# Install and export the ddph package: every library of core/ (ddph::common, ddph::sampler, …,
# ddph::train: the global property DDPH_LIBRARIES, cmake/DdphLibrary.cmake) with its headers,
# the on-demand LibTorch module, ddph::ddp-sim, the CMake config with DdphSamplerChecks.cmake, the
# Python line-protocol examples and the audit recorder (python/).
# Consumers:
#   find_package(ddph 0.2 REQUIRED)                 # every library; or COMPONENTS sampler verify …
#   target_link_libraries(my_tests PRIVATE ddph::verify)   # or ddph::sampler, ddph::ddp, …
include(CMakePackageConfigHelpers)

set(DDPH_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddph)
set(DDPH_INSTALL_PYTHON_DIR ${CMAKE_INSTALL_DATADIR}/ddph/python)
get_property(DDPH_LIBRARIES GLOBAL PROPERTY DDPH_LIBRARIES)
get_target_property(_ddph_common_type ddph_common TYPE)
if(_ddph_common_type STREQUAL "STATIC_LIBRARY")
  set(DDPH_LIBRARIES_STATIC 1)
else()
  set(DDPH_LIBRARIES_STATIC 0)
endif()

set(_ddph_targets)
foreach(library IN LISTS DDPH_LIBRARIES)
  list(APPEND _ddph_targets ddph_${library})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/${library}/include/ddph
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(TARGETS ${_ddph_targets} ddp-sim
  EXPORT ddph-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The on-demand LibTorch module (NOTE [LibTorch on demand]): installed beside the libraries; a
# consumer's programs find it through the RUNPATH ddph::common gives them.
install(TARGETS ddph_libtorch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_BINARY_DIR}/core/common/include/ddph/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddph)
install(EXPORT ddph-targets
  NAMESPACE ddph::
  FILE ddph-targets.cmake
  DESTINATION ${DDPH_INSTALL_CMAKE_DIR})

string(REPLACE ";" " " DDPH_LIBRARIES_LIST "${DDPH_LIBRARIES}")
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
