# ddph_generate_trace_schema(SCHEMA <json> OUTPUT <header>)
# Writes a C++ header of the names in the audit trace's schema (core/trace/trace_schema.json):
# the format's version (kFormatVersion) and name, and for each event a namespace holding its name (kEvent) and its
# fields' names (dataset_len -> kDatasetLen; an object-list field's entries in a namespace of the
# field's name), plus kEvents, every event's name in the schema's order, and launch_record: launch.json's
# file name (kFile) and fields. The reader and the writer
# spell names through it, so a name the schema lacks does not compile. Run at configure time; an
# edit of the schema reconfigures (CMAKE_CONFIGURE_DEPENDS), and the header is rewritten only when
# its text changes.

# snake_case -> kCamelCase
function(_ddph_schema_constant name out)
  string(REPLACE "_" ";" parts "${name}")
  set(result "k")
  foreach(part IN LISTS parts)
    string(SUBSTRING "${part}" 0 1 head)
    string(SUBSTRING "${part}" 1 -1 tail)
    string(TOUPPER "${head}" head)
    string(APPEND result "${head}${tail}")
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# The constants of a JSON array of fields (`json` text), indented by `indent`.
function(_ddph_schema_fields json indent out)
  set(text "")
  string(JSON count LENGTH "${json}")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON name GET "${json}" ${i} name)
      _ddph_schema_constant("${name}" constant)
      string(APPEND text "${indent}inline constexpr const char* ${constant} = \"${name}\";\n")
      string(JSON entries ERROR_VARIABLE no_entries GET "${json}" ${i} entries)
      if(NOT no_entries)
        _ddph_schema_fields("${entries}" "${indent}" nested)
        string(APPEND text "${indent}namespace ${name} {  // each entry of ${name}\n"
                           "${nested}${indent}}  // namespace ${name}\n")
      endif()
    endforeach()
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(ddph_generate_trace_schema)
  cmake_parse_arguments(arg "" "SCHEMA;OUTPUT" "" ${ARGN})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${arg_SCHEMA}")
  file(READ "${arg_SCHEMA}" schema)
  string(JSON version GET "${schema}" version)
  string(JSON trace GET "${schema}" trace)
  string(JSON common GET "${schema}" common_fields)
  _ddph_schema_fields("${common}" "" common_text)
  file(RELATIVE_PATH source "${PROJECT_SOURCE_DIR}" "${arg_SCHEMA}")
  string(CONCAT text "#pragma once\n// Generated from ${source} by cmake/DdphTraceSchema.cmake: edit the schema, not this.\n\n"
           "namespace ddph::trace::trace_schema {\n\n"
           "inline constexpr int kFormatVersion = ${version};\n"
           "inline constexpr const char* kTraceName = \"${trace}\";\n\n"
           "// Fields of every event.\n${common_text}")
  set(names "")
  string(JSON events GET "${schema}" events)
  string(JSON count LENGTH "${events}")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON event GET "${events}" ${i} name)
    string(JSON meaning GET "${events}" ${i} meaning)
    string(JSON fields GET "${events}" ${i} fields)
    _ddph_schema_fields("${fields}" "" fields_text)
    string(APPEND text "\n// ${meaning}\nnamespace ${event} {\n"
                       "inline constexpr const char* kEvent = \"${event}\";\n"
                       "${fields_text}}  // namespace ${event}\n")
    string(APPEND names "    \"${event}\",\n")
  endforeach()
  # launch.json, the launcher's record: its file name and fields.
  string(JSON launch GET "${schema}" launch_record)
  string(JSON launch_file GET "${launch}" file)
  string(JSON launch_fields GET "${launch}" fields)
  _ddph_schema_fields("${launch_fields}" "" launch_text)
  string(APPEND text "\n// launch.json, the launcher's record beside the ranks' files.\nnamespace launch_record {\n"
                     "inline constexpr const char* kFile = \"${launch_file}\";\n"
                     "${launch_text}}  // namespace launch_record\n")
  string(APPEND text "\n/// Every event's name, in the schema's order.\n"
                     "inline constexpr const char* kEvents[] = {\n${names}};\n\n"
                     "}  // namespace ddph::trace::trace_schema\n")
  file(WRITE "${arg_OUTPUT}.new" "${text}")
  configure_file("${arg_OUTPUT}.new" "${arg_OUTPUT}" COPYONLY)
  file(REMOVE "${arg_OUTPUT}.new")
endfunction()
