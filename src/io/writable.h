// Probes for writing, for commands that write their results at the end: a path that cannot be
// written fails at the start, in one line, instead of after the work. Each probe creates and
// removes a temporary file where write_file_atomic would create its own, so it answers for
// permissions, read-only file systems and a full inode table alike, and leaves nothing behind.
#pragma once

#include <string>

namespace gmlp {

// `path` can be written with write_file_atomic: its folder exists and takes a new file, and
// path itself is not a folder. Throws gmlp::Error saying which part fails and why.
void check_writable_file(const std::string& path);

// Files can be written in `dir`: it is a folder that takes a new file, or it does not exist yet
// and its nearest existing ancestor is a folder that takes one (so create_directories will
// succeed). Creates nothing. Throws gmlp::Error saying which part fails and why.
void check_writable_folder(const std::string& dir);

}  // namespace gmlp
