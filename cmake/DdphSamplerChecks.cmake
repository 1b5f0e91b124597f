# Register sampler checks in ctest. Shipped with the installed package (find_package(ddph) includes
# it) and used in this project's own tree.
#
#   ddph_add_sampler_test(<name> SOURCES … [LIBS …] [LABELS …] [TIMEOUT s])
#     A GoogleTest executable of C++ sampler checks, linked to ddph::verify (and so ddph::sampler)
#     and GoogleTest, each TEST registered with ctest (gtest_discover_tests). In a test, one call
#     checks a contract:
#       EXPECT_TRUE(ddph::verify::testing::satisfiesContract(mySampler, "pytorch"));
#
#   ddph_add_sampler_check(<name> (COMMAND <cmd> [args…] | BUILTIN <name>)
#                          [CONTRACT <c>] [PROPERTIES p…] [CASES k] [SEED s]
#                          [REQUEST_TIMEOUT s] [MAX_DATASET_SIZE n] [MAX_REPLICAS w] [NO_SHUFFLE]
#                          [EXPECT_VIOLATION <property>] [LABELS …] [TIMEOUT s])
#     One ctest test that runs `ddp-sim check-sampler` against a sampler in any language speaking
#     the line protocol (COMMAND; generator expressions such as $<TARGET_FILE:tgt> work) or a
#     built-in one. It passes when the contract holds; with EXPECT_VIOLATION it passes only when
#     that property is reported violated (a negative control for the check itself).
include_guard(GLOBAL)
include(GoogleTest)

function(ddph_add_sampler_test name)
  cmake_parse_arguments(arg "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "ddph_add_sampler_test(${name}): SOURCES is required")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  if(NOT arg_LABELS)
    set(arg_LABELS sampler)
  endif()
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} ddph::verify GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${arg_LABELS}" TIMEOUT ${arg_TIMEOUT})
endfunction()

function(ddph_add_sampler_check name)
  cmake_parse_arguments(arg "NO_SHUFFLE"
    "BUILTIN;CONTRACT;CASES;SEED;REQUEST_TIMEOUT;MAX_DATASET_SIZE;MAX_REPLICAS;EXPECT_VIOLATION;TIMEOUT"
    "COMMAND;PROPERTIES;LABELS" ${ARGN})
  if((arg_COMMAND AND arg_BUILTIN) OR (NOT arg_COMMAND AND NOT arg_BUILTIN))
    message(FATAL_ERROR "ddph_add_sampler_check(${name}): give exactly one of COMMAND or BUILTIN")
  endif()
  if(TARGET ddph::ddp-sim)
    set(ddp_sim $<TARGET_FILE:ddph::ddp-sim>)
  elseif(TARGET ddp-sim)  # inside ddp-harness's own tree
    set(ddp_sim $<TARGET_FILE:ddp-sim>)
  else()
    message(FATAL_ERROR "ddph_add_sampler_check(${name}): no ddp-sim target (find_package(ddph) first)")
  endif()
  set(args check-sampler)
  if(arg_CONTRACT)
    list(APPEND args --contract ${arg_CONTRACT})
  endif()
  if(arg_PROPERTIES)
    list(JOIN arg_PROPERTIES "," properties)
    list(APPEND args --properties ${properties})
  endif()
  foreach(option CASES SEED MAX_DATASET_SIZE MAX_REPLICAS)
    if(DEFINED arg_${option})
      string(TOLOWER ${option} flag)
      string(REPLACE "_" "-" flag ${flag})
      list(APPEND args --${flag} ${arg_${option}})
    endif()
  endforeach()
  if(arg_REQUEST_TIMEOUT)
    list(APPEND args --timeout ${arg_REQUEST_TIMEOUT})
  endif()
  if(arg_NO_SHUFFLE)
    list(APPEND args --no-shuffle)
  endif()
  if(arg_BUILTIN)
    list(APPEND args --builtin ${arg_BUILTIN})
  else()
    list(APPEND args -- ${arg_COMMAND})
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  if(NOT arg_LABELS)
    set(arg_LABELS sampler)
  endif()
  add_test(NAME ${name} COMMAND ${ddp_sim} ${args})
  set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}" TIMEOUT ${arg_TIMEOUT})
  if(arg_EXPECT_VIOLATION)
    # check-sampler prints "  FAIL <property> …" for each violated property (exit 1); a protocol
    # error (exit 2) prints no such line, so it still fails the test.
    set_tests_properties(${name} PROPERTIES
      PASS_REGULAR_EXPRESSION "\n  FAIL ${arg_EXPECT_VIOLATION} ")
  endif()
endfunction()
