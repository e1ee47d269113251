// Errors: gmlp::Error (a std::runtime_error) for a user's or environment's mistake, one full
// sentence, caught at the CLI boundary and printed as one line; gmlp::InternalError (a
// std::logic_error, not an Error) from GMLP_CHECK for a broken internal invariant, i.e. a bug in
// gmlp, so that code handling a user's mistakes never swallows one.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
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

// Text from a user or a file as an error message shows it: 'x', or, when it holds a control
// character, in double quotes with the escapes of a JSON string ("a\nb"), so that the message
// stays one line whatever the bytes.
inline std::string shown(std::string_view text) {
  bool plain = true;
  for (const char c : text) plain = plain && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  if (plain) return cat("'", text, "'");
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += "\\u00", out += hex[u >> 4], out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + '"';
}

}  // namespace gmlp

#define GMLP_CHECK(cond)                                                                                       \
  do {                                                                                                         \
    if (!(cond)) throw ::gmlp::InternalError(::gmlp::cat(__FILE__, ":", __LINE__, ": check failed: ", #cond)); \
  } while (0)
