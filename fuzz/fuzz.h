// What the libFuzzer harnesses share: the rule for what counts as a finding, and in-memory files
// for the parsers whose entry point takes a path.
//
// A parser given bad bytes must answer with a one-line gmlp::Error. Anything else is a finding: a
// crash, a sanitizer report, another exception escaping (a broken internal check's
// gmlp::InternalError among them; libFuzzer reports it as a deadly signal), or an Error whose
// message is not one line (reported here by abort()).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gmlp::fuzz {

// Aborts (a libFuzzer finding) when an error message is not the one line a user should see.
inline void check_message(const char* what) {
  const std::string_view m = what;
  const char* why = m.empty() ? "is empty" : m.find('\n') != std::string_view::npos ? "is not one line" : nullptr;
  if (!why) return;
  std::fprintf(stderr, "gmlp fuzz: the error message %s:\n%s\n", why, what);
  std::abort();
}

// Runs f(); a gmlp::Error is the expected answer to bad input and is checked by check_message.
template <class F>
void run(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    check_message(e.what());
  }
}

// A file in memory (memfd_create) that a path-taking parser opens as /proc/self/fd/N: no disk,
// no clean-up, one per harness, rewritten for every input.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("gmlp fuzz: memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

  // The file now holds exactly these bytes.
  void set(const void* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) die("ftruncate");
    const char* p = static_cast<const char*>(data);
    for (size_t done = 0; done < size;) {
      const ssize_t n = pwrite(fd_, p + done, size - done, off_t(done));
      if (n <= 0) die("pwrite");
      done += size_t(n);
    }
  }
  void set(std::string_view bytes) { set(bytes.data(), bytes.size()); }

 private:
  [[noreturn]] static void die(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_ = -1;
  std::string path_;
};

// Splits an input into parts at a separator line, so that one input can carry several files
// (the seed corpus writes them this way; fuzz/make_corpus.py). Missing parts are empty.
inline constexpr std::string_view kSplit = "\n--gmlp-fuzz-split--\n";

template <size_t N>
void split(std::string_view input, std::string_view (&parts)[N]) {
  for (size_t i = 0; i < N; ++i) {
    const size_t at = i + 1 < N ? input.find(kSplit) : std::string_view::npos;
    parts[i] = input.substr(0, at);
    input = at == std::string_view::npos ? std::string_view() : input.substr(at + kSplit.size());
  }
}

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace gmlp::fuzz
