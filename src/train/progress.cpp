#include "train/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "train/eval_subset.h"

namespace gmlp {

std::string format_duration(double seconds) {
  const int64_t s = std::llround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", long(s / 3600), long(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", long(s / 60), long(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", long(s));
  return buf;
}

Progress::Progress(int64_t total_steps, int64_t log_every)
    : total_(total_steps),
      every_(log_every),
      tty_(isatty(fileno(stderr))),
      start_(std::chrono::steady_clock::now()),
      last_(start_ - std::chrono::seconds(1)) {}

void Progress::update(int64_t done, const char* line) {
  if (!tty_ && every_ <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const int64_t mark = tty_ ? 0 : done / every_;
  if (tty_ && now - last_ < std::chrono::milliseconds(250)) {
    held_ = line, held_done_ = done;
    return;
  }
  if (!tty_ && mark == last_mark_) return;
  last_mark_ = mark;
  draw(now, done, line);
}

void Progress::draw(std::chrono::steady_clock::time_point now, int64_t done, const char* line) {
  last_ = now;
  held_.clear();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const int64_t this_session = done - offset_;
  const std::string eta =
      this_session > 0 ? format_duration(elapsed / double(this_session) * double(total_ - done)) : "?";
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s  eta %s", line, eta.c_str());
    dirty_ = true;
  } else {
    std::fprintf(stderr, "%s  eta %s\n", line, eta.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (!held_.empty()) {
    const std::string line = std::move(held_);
    draw(std::chrono::steady_clock::now(), held_done_, line.c_str());
  }
  if (tty_ && dirty_) std::fputc('\n', stderr);
  dirty_ = false;
}

void Progress::clear() {
  held_.clear();
  if (tty_ && dirty_) std::fputs("\r\033[K", stderr), std::fflush(stderr);
  dirty_ = false;
}

EvalProgress::EvalProgress(std::string what, int64_t total)
    : progress_(total, 0), what_(std::move(what)), total_(total) {}

void EvalProgress::update(int64_t done, int64_t correct) {
  std::string line = "evaluating " + what_ + "  " + thousands(done) + "/" + thousands(total_);
  if (correct >= 0 && done > 0) {
    char acc[32];
    std::snprintf(acc, sizeof acc, "  acc %.2f%%", 100.0 * double(correct) / double(done));
    line += acc;
  }
  progress_.update(done, line.c_str());
}

}  // namespace gmlp
