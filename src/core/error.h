// Errors: gmlp::Error (a std::runtime_error) for a user's or environment's mistake, one full
// sentence, caught at the CLI boundary and printed as one line; gmlp::InternalError (a
// std::logic_error, not an Error) from GMLP_CHECK for a broken internal invariant, i.e. a bug in
// gmlp, so that code handling a user's mistakes never swallows one.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace gmlp {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

// Concatenates anything streamable: cat("expected ", n, " tensors").
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream s;
  (s << ... << std::forward<Args>(args));
  return s.str();
}

template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

}  // namespace gmlp

#define GMLP_CHECK(cond)                                                                                       \
  do {                                                                                                         \
    if (!(cond)) throw ::gmlp::InternalError(::gmlp::cat(__FILE__, ":", __LINE__, ": check failed: ", #cond)); \
  } while (0)
