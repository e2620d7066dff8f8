# One INTERFACE target carries the warning set; every Sluice target links it.
add_library(sluice_warnings INTERFACE)
target_compile_options(sluice_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Woverloaded-virtual -Wconversion -Wsign-conversion
    -Wdouble-promotion -Wformat -Wformat-security -Wimplicit-fallthrough>)
# GCC 12 at -O3 reports impossible -Wrestrict overlaps inside std::string (GCC bug 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(sluice_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(SLUICE_WERROR)
  target_compile_options(sluice_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

if(SLUICE_SANITIZE)
  add_compile_options(-fsanitize=${SLUICE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SLUICE_SANITIZE})
endif()
