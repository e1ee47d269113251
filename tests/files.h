// Helpers for tests that read and write files: a per-process temporary folder, paths named after
// the running test (so tests never share files), and the check that a failure is a one-line
// gmlp::Error naming what it should.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace gmlp::test {

// The per-process temporary folder, created on first use and removed at exit.
inline const std::filesystem::path& temp_folder() {
  struct Folder {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("gmlp_test_", getpid());
    Folder() { std::filesystem::create_directories(dir); }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static Folder folder;
  return folder.dir;
}

// A fresh path in temp_folder() named after the running test.
inline std::string tmp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (temp_folder() / cat(info->test_suite_name(), ".", info->name(), ".", name)).string();
}

// Expects f() to throw a one-line gmlp::Error containing every one of `phrases`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> phrases) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    for (const std::string& p : phrases)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nlacks: " << p;
    return;
  }
  ADD_FAILURE() << "expected a gmlp::Error mentioning '" << *phrases.begin() << "'";
}

}  // namespace gmlp::test
