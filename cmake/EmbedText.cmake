# Writes a file's text into a C++ source as one raw string literal, so that a library can carry
# a file it needs at run time instead of reading it from the source tree (which an installed
# kiln no longer has). Run as a script at build time:
#   cmake -DINPUT=<file> -DOUTPUT=<file.inc> -DVARIABLE=<name> -P EmbedText.cmake
# OUTPUT then defines `static const char VARIABLE[]` holding INPUT's bytes exactly.
foreach(argument INPUT OUTPUT VARIABLE)
  if(NOT DEFINED ${argument})
    message(FATAL_ERROR "EmbedText.cmake: ${argument} is not set")
  endif()
endforeach()

set(delimiter "kiln_embed") # at most 16 characters
file(READ "${INPUT}" text)
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "EmbedText.cmake: ${INPUT} contains the raw string's delimiter )${delimiter}\"")
endif()

file(RELATIVE_PATH shown "${CMAKE_CURRENT_LIST_DIR}/.." "${INPUT}")
set(contents "// Generated from ${shown} by cmake/EmbedText.cmake; do not edit.\n")
string(APPEND contents "static const char ${VARIABLE}[] = R\"${delimiter}(${text})${delimiter}\";\n")
file(WRITE "${OUTPUT}" "${contents}")
