# Generates a header holding one text file as a raw string constant, so the library needs no
# data file at run time and the file in the source tree stays the single source.
# Usage: cmake -DIN=file -DOUT=header.h -DNAMESPACE=ns -DSYMBOL=kName -P embed_text.cmake
file(READ ${IN} text)
get_filename_component(source ${IN} NAME)
file(WRITE ${OUT}.tmp "// Generated from ${source} by cmake/embed_text.cmake. Do not edit.\n#pragma once\n\nnamespace ${NAMESPACE} {\ninline constexpr const char ${SYMBOL}[] = R\"strata_text(${text})strata_text\";\n}  // namespace ${NAMESPACE}\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
