// The live progress line of long work, on stderr: redrawn in place on a terminal (at most four
// times a second), or written as a plain line every `log_every` steps when stderr is a file
// (log_every 0: nothing when stderr is a file, for work whose result is reported anyway).
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
  // Ends the in-place line (prints a newline on a terminal), first drawing the last update if
  // the rate limit held it back, so the line ends on the final step.
  void finish();
  // Erases the in-place line instead, for a report to take its place.
  void clear();
  // Steps the run had done before this process resumed it (for the ETA after a resume).
  void set_offset(int64_t done) { offset_ = done; }

 private:
  void draw(std::chrono::steady_clock::time_point now, int64_t done, const char* line);

  int64_t total_, every_, offset_ = 0, last_mark_ = -1, held_done_ = 0;
  bool tty_, dirty_ = false;
  std::string held_;  // on a terminal, the last update the rate limit held back
  std::chrono::steady_clock::time_point start_, last_;
};

// An evaluation pass's progress, on a terminal only: "evaluating test  2,560/10,000  acc 81.17%"
// with its ETA, redrawn in place and erased when the pass ends (the caller reports the result).
class EvalProgress {
 public:
  EvalProgress(std::string what, int64_t total);
  ~EvalProgress() { progress_.clear(); }
  // After `done` items, `correct` of them right (correct < 0: no accuracy yet).
  void update(int64_t done, int64_t correct = -1);

 private:
  Progress progress_;
  std::string what_;
  int64_t total_;
};

std::string format_duration(double seconds);  // "1h02m", "3m12s", "45s"

}  // namespace gmlp
