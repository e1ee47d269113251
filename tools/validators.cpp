// The command line's checks on values, shared by every subcommand: each turns a bad value into a
// usage error (exit 2) naming the flag, what it expects and what it found, while the arguments
// are parsed, so nothing is read, allocated or written first. --config entries become arguments
// before parsing (config_file.cpp), so they pass the same checks. Output paths are probed for
// writing at the start of a command, before its work.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "core/error.h"
#include "core/threads.h"
#include "io/writable.h"

namespace gmlp::cli {

namespace {

std::string with_hint(const std::string& message, const std::string& hint) {
  return hint.empty() ? message : message + " (" + hint + ")";
}

// A decimal integer and nothing else.
bool parse_whole(const std::string& value, long long& n) {
  try {
    size_t end = 0;
    n = std::stoll(value, &end);
    return end == value.size();
  } catch (const std::exception&) {
    return false;
  }
}

// "%g" of a bound: 0.001, 1, 1e+06.
std::string bound(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

CLI::Validator at_least(long long min, const std::string& hint) {
  return CLI::Validator(
      [min, hint](std::string& value) -> std::string {
        long long n = 0;
        if (parse_whole(value, n) && n >= min) return "";
        return with_hint("expected a whole number >= " + std::to_string(min) + ", found '" + value + "'", hint);
      },
      "");
}

CLI::Validator whole_in(long long min, long long max, const std::string& hint) {
  return CLI::Validator(
      [min, max, hint](std::string& value) -> std::string {
        long long n = 0;
        if (parse_whole(value, n) && n >= min && n <= max) return "";
        return with_hint("expected a whole number in " + std::to_string(min) + ".." + std::to_string(max) +
                             ", found '" + value + "'",
                         hint);
      },
      "");
}

CLI::Validator real_in(double lo, double hi, Ends ends, const std::string& hint) {
  const bool lo_open = ends == Ends::open || ends == Ends::open_closed;
  const bool hi_open = ends == Ends::open || ends == Ends::closed_open;
  const std::string expected = std::isinf(hi) ? std::string("a finite number ") + (lo_open ? "> " : ">= ") + bound(lo)
                                              : std::string("a number in ") + (lo_open ? "(" : "[") + bound(lo) + ", " +
                                                    bound(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        const bool ok = !value.empty() && end == value.c_str() + value.size() && std::isfinite(v) &&
                        (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
        return ok ? "" : with_hint("expected " + expected + ", found '" + value + "'", hint);
      },
      "");
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool digits =
            !value.empty() && value.size() <= 20 && value.find_first_not_of("0123456789") == std::string::npos;
        if (digits && (value.size() < 20 || value <= "18446744073709551615")) return "";
        return "expected a whole number in 0..18446744073709551615, found '" + value + "'";
      },
      "");
}

void add_threads_option(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "Threads for matrix products and loops (0: all cores)")
      ->check(whole_in(0, available_cpus(), "the CPUs this process may use; 0: all of them"))
      ->capture_default_str();
}

void check_output_file(const std::string& path, const std::string& flag) {
  try {
    check_writable_file(path);
  } catch (const Error& e) {
    fail("invalid ", flag, " '", path, "': ", e.what());
  }
}

void check_output_folder(const std::string& dir, const std::string& flag) {
  try {
    check_writable_folder(dir);
  } catch (const Error& e) {
    fail("invalid ", flag, " '", dir, "': ", e.what());
  }
}

}  // namespace gmlp::cli
