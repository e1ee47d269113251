# Writes GMLP_COMMIT_FILE, the one source file that knows the git commit, and touches it only when
# the commit or the dirty state changed: a new commit recompiles that file and relinks, nothing
# else. Run at configure time and, by the gmlp_commit target, at every build:
#   cmake -DGMLP_SOURCE_DIR=<gmlp sources> -DGMLP_COMMIT_FILE=<out.cpp> -P gmlpCommit.cmake

set(_gmlp_commit "unknown")
find_program(_gmlp_git git)
if(_gmlp_git)
  # Only gmlp's own repository counts: sources copied into another project's tree are not it.
  execute_process(COMMAND "${_gmlp_git}" -C "${GMLP_SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE _gmlp_top OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _gmlp_rc ERROR_QUIET)
  file(REAL_PATH "${GMLP_SOURCE_DIR}" _gmlp_src)
  if(_gmlp_rc EQUAL 0)
    file(REAL_PATH "${_gmlp_top}" _gmlp_top)
  endif()
  if(_gmlp_rc EQUAL 0 AND _gmlp_top STREQUAL _gmlp_src)
    execute_process(COMMAND "${_gmlp_git}" -C "${GMLP_SOURCE_DIR}" rev-parse --short HEAD
                    OUTPUT_VARIABLE _gmlp_hash OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _gmlp_rc ERROR_QUIET)
    if(_gmlp_rc EQUAL 0)
      set(_gmlp_commit "${_gmlp_hash}")
      # --no-optional-locks: never take the index lock, which a concurrent git command may hold.
      execute_process(COMMAND "${_gmlp_git}" --no-optional-locks -C "${GMLP_SOURCE_DIR}"
                              status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE _gmlp_changes RESULT_VARIABLE _gmlp_rc ERROR_QUIET)
      if(NOT _gmlp_rc EQUAL 0 OR NOT _gmlp_changes STREQUAL "")
        string(APPEND _gmlp_commit "+dirty")
      endif()
    endif()
  endif()
endif()

# file(CONFIGURE) leaves the file (and its timestamp) alone when the content is unchanged.
file(CONFIGURE OUTPUT "${GMLP_COMMIT_FILE}" @ONLY CONTENT
"// Written by cmake/gmlpCommit.cmake at build time.
namespace gmlp {
const char* build_commit() { return \"${_gmlp_commit}\"; }
}  // namespace gmlp
")
