# ddph_add_library(NAME SOURCES … [PUBLIC …] [PRIVATE …])
# One library per folder under core/: target ddph_NAME, alias and exported name ddph::NAME, public
# headers in core/NAME/include/ddph/NAME/, private ones beside the sources in core/NAME/src/. The
# folder's CMakeLists.txt says what it depends on; cmake/DdphInstall.cmake installs and exports
# every library made here (the global property DDPH_LIBRARIES).
function(ddph_add_library name)
  cmake_parse_arguments(arg "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  set(target ddph_${name})
  add_library(${target} ${arg_SOURCES})
  add_library(ddph::${name} ALIAS ${target})
  # Position-independent: the on-demand LibTorch module (a shared object) links comm's code.
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_17)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${arg_PUBLIC}
                        PRIVATE ${arg_PRIVATE} $<BUILD_INTERFACE:ddph_warnings>)
  set_property(GLOBAL APPEND PROPERTY DDPH_LIBRARIES ${name})
endfunction()
