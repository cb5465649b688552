# Generates strata/keras/applications/builtin_specs.h: every models/*.json as a raw string, so
# `--model reference-cnn` needs no file at run time and the JSON files stay the single source.
# Usage: cmake -DSPEC_DIR=... -DOUT=... -P embed_specs.cmake
file(GLOB specs ${SPEC_DIR}/*.json)
list(SORT specs)
set(body "// Generated from models/*.json by cmake/embed_specs.cmake. Do not edit.\n#pragma once\n\nnamespace strata::keras::applications {\nstruct BuiltinSpecEntry { const char* name; const char* json; };\ninline constexpr BuiltinSpecEntry kBuiltinSpecs[] = {\n")
foreach(spec ${specs})
  get_filename_component(name ${spec} NAME_WE)
  file(READ ${spec} text)
  string(APPEND body "  {\"${name}\", R\"strata_spec(${text})strata_spec\"},\n")
endforeach()
string(APPEND body "};\n}  // namespace strata::keras::applications\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
