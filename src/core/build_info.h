// What a bug report needs to say about this build and this machine: `gmlp --version`.
#pragma once

#include <string>

namespace gmlp {

// The short git commit the build was made from, "+dirty" when the tree had uncommitted changes,
// "unknown" outside a git checkout. Defined in a file the build writes, so that a new commit
// recompiles only that file.
const char* build_commit();

// Three lines, no final newline: version, commit, compiler, build type and target; the CPU, its vector
// extensions and what the bf16 matrix products run on; oneDNN's version and ISA, the threads.
std::string version_report();

}  // namespace gmlp
