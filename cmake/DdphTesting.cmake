# ddph_add_gtest(NAME SOURCES … [LIBS …] [LABELS …] [TIMEOUT s] [TEST_PREFIX p] [RESOURCE_LOCK …]
#                [NO_TOOLS])
# One GoogleTest executable, its tests discovered by ctest (so GTEST_SKIP shows as skipped), each
# with the labels, a timeout and the resource locks (tests sharing e.g. the GPU never run at
# once). TEST_PREFIX is put before every discovered test's name (e.g.
# "dataset_mix." so that `ctest -R dataset` selects the executable's tests). NO_TOOLS: a test of
# library code alone, built without ddp-sim, ddp-train and the LibTorch module (ddph_test_paths).
include(GoogleTest)

# ddph_test_paths(TARGET): what a test program finds, one name each, the same in every test:
#   DDPH_DDP_SIM, DDPH_DDP_TRAIN  the two tools (built before the test)
#   DDPH_PYTHON                   the Python that imports torch ("" where there is none)
#   DDPH_EXAMPLES_DIR, DDPH_MNIST_DIR, DDPH_AUDIT_PROGRAMS_DIR, DDPH_PYTHON_PACKAGE_DIR
#   DDPH_WITH_FILE_LIMIT          a program run under a file-size limit (integration/support)
# and the on-demand LibTorch module is built before it (loaded, not linked).
function(ddph_test_paths target)
  target_compile_definitions(${target} PRIVATE
    DDPH_DDP_SIM="$<TARGET_FILE:ddp-sim>"
    DDPH_DDP_TRAIN="$<TARGET_FILE:ddp-train>"
    DDPH_PYTHON="${DDPH_PYTHON}"
    DDPH_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples"
    DDPH_MNIST_DIR="${PROJECT_SOURCE_DIR}/data/mnist"
    DDPH_AUDIT_PROGRAMS_DIR="${PROJECT_SOURCE_DIR}/integration/audit_programs"
    DDPH_PYTHON_PACKAGE_DIR="${PROJECT_SOURCE_DIR}/python"
    DDPH_WITH_FILE_LIMIT="$<TARGET_FILE:with_file_limit>")
  add_dependencies(${target} ddp-sim ddp-train ddph_libtorch with_file_limit)
endfunction()

function(ddph_add_gtest name)
  cmake_parse_arguments(arg "NO_TOOLS" "TIMEOUT;TEST_PREFIX" "SOURCES;LIBS;LABELS;RESOURCE_LOCK"
                        ${ARGN})
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main ddph_warnings)
  if(NOT arg_NO_TOOLS)
    ddph_test_paths(${name})
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    TEST_PREFIX "${arg_TEST_PREFIX}"
    TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT ${arg_TIMEOUT})
  # Labels are set by a script ctest includes after the discovered tests: through PROPERTIES a
  # list of several labels ("integration;multiproc") is flattened into separate arguments, which
  # set_tests_properties reads as LABELS integration plus a property named "multiproc" (and the
  # TIMEOUT after it was lost). Quoted here, the list stays one value.
  set(label_script "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${label_script}"
    "foreach(t IN LISTS ${name}_TESTS)\n"
    "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${arg_LABELS}\")\n"
    "  if(NOT \"${arg_RESOURCE_LOCK}\" STREQUAL \"\")\n"
    "    set_tests_properties(\"\${t}\" PROPERTIES RESOURCE_LOCK \"${arg_RESOURCE_LOCK}\")\n"
    "  endif()\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${label_script}")
endfunction()
