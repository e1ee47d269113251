// The live progress line of long work, on stderr: redrawn in place on a terminal (at most four
// times a second), or written as a plain line every `log_every` steps when stderr is a file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gmlp {

class Progress {
 public:
  Progress(int64_t total_steps, int64_t log_every);
  // `line` describes the state after `done` steps; the ETA is appended from the measured rate.
  void update(int64_t done, const char* line);
  // Ends the in-place line (prints a newline on a terminal).
  void finish();
  // Total steps done in earlier sessions of the same run (for ETA after a resume).
  void set_offset(int64_t done) { offset_ = done; }

 private:
  int64_t total_, every_, offset_ = 0, last_mark_ = -1;
  bool tty_, dirty_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

std::string format_duration(double seconds);  // "1h02m", "3m12s", "45s"

}  // namespace gmlp
