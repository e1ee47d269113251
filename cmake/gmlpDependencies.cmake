# The libraries the gmlp library links, as imported targets gmlp_dep::*. gmlp's own build uses
# this file, and it is installed beside gmlpConfig.cmake because a static libgmlp needs the same
# libraries at the application's link. Debian's oneDNN CMake package insists on OpenCL, which
# gmlp does not use, so oneDNN (like stb and SentencePiece, which ship none) is found directly.
#
# In: GMLP_DEPENDENCIES_GLOBAL (make the imported targets global: gmlp may be a subproject whose
#     targets a parent directory links). Out: GMLP_MISSING_DEPENDENCIES, empty when all are found.

set(GMLP_MISSING_DEPENDENCIES "")

find_package(OpenMP QUIET COMPONENTS CXX)
if(NOT TARGET OpenMP::OpenMP_CXX)
  list(APPEND GMLP_MISSING_DEPENDENCIES "OpenMP (C++)")
endif()
find_package(ZLIB QUIET)
if(NOT TARGET ZLIB::ZLIB)
  list(APPEND GMLP_MISSING_DEPENDENCIES "zlib")
endif()
# The image decoders (src/io/image.cpp): libpng and libjpeg-turbo, through CMake's own modules.
find_package(PNG QUIET)
if(NOT TARGET PNG::PNG)
  list(APPEND GMLP_MISSING_DEPENDENCIES "libpng")
endif()
find_package(JPEG QUIET)
if(NOT TARGET JPEG::JPEG)
  list(APPEND GMLP_MISSING_DEPENDENCIES "libjpeg")
endif()

find_library(GMLP_DNNL_LIBRARY dnnl DOC "oneDNN (libdnnl)")
find_library(GMLP_SENTENCEPIECE_LIBRARY sentencepiece DOC "SentencePiece")
find_library(GMLP_SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train DOC "SentencePiece's trainer")
# The static stb, when there is one: its functions then need nothing at run time.
find_library(GMLP_STB_LIBRARY NAMES libstb.a stb DOC "nothings/stb image functions (libstb)")

if(GMLP_DEPENDENCIES_GLOBAL)
  set(_gmlp_scope GLOBAL)
else()
  set(_gmlp_scope "")
endif()
foreach(_gmlp_dep dnnl sentencepiece sentencepiece_train stb)
  string(TOUPPER "${_gmlp_dep}" _gmlp_var)
  set(_gmlp_path "${GMLP_${_gmlp_var}_LIBRARY}")
  if(NOT _gmlp_path)
    list(APPEND GMLP_MISSING_DEPENDENCIES "lib${_gmlp_dep}")
  elseif(NOT TARGET gmlp_dep::${_gmlp_dep})
    add_library(gmlp_dep::${_gmlp_dep} UNKNOWN IMPORTED ${_gmlp_scope})
    set_target_properties(gmlp_dep::${_gmlp_dep} PROPERTIES IMPORTED_LOCATION "${_gmlp_path}")
  endif()
endforeach()
unset(_gmlp_dep)
unset(_gmlp_var)
unset(_gmlp_path)
unset(_gmlp_scope)
