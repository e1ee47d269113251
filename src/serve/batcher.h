// gmlp serve's dynamic batcher, as Triton's: HTTP threads queue jobs; one inference thread takes
// the oldest, then more of the same kind until the batch holds max_batch rows or max_delay has
// passed since the oldest was queued, and runs them together. A full queue refuses a job (the
// server answers 429); stop() lets the thread run what is queued, then end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve/metrics.h"

namespace gmlp::serve {

// One request's work and, once `done` is ready, its answer.
struct Job {
  enum class Op { logits, fill_mask, classify_text };
  Op op = Op::logits;
  int64_t rows = 1;  // images or sequences it adds to a batch
  // logits: images (rows, C, S, S) in [0, 1], or token ids (rows, tokens), unpadded
  std::vector<float> pixels;
  std::vector<int32_t> ids;
  int64_t tokens = 0;
  // fill_mask and classify_text: the texts (and second texts), the classes or tokens to keep
  std::vector<std::string> texts, pairs;
  int top = 5;

  // Written by the inference thread before done is set.
  std::vector<float> logits;  // (rows, K) or, for a masked-language model, (rows, tokens, V)
  nlohmann::json result;      // fill_mask, classify_text: one entry per text
  int error_status = 0;       // non-zero: the job failed, with this status and message
  std::string error;

  std::chrono::steady_clock::time_point queued;
  std::promise<void> done;
};

class Batcher {
 public:
  struct Options {
    int64_t max_batch = 8;     // rows per batch
    int64_t max_delay_us = 0;  // how long the oldest job may wait for others
    size_t max_queue = 64;     // jobs waiting; one more is refused
  };
  // run gets a batch of jobs of one Op, rows summing to at most max_batch, and fills in each
  // job's answer or error; on_start runs first on the inference thread (its thread count).
  using Run = std::function<void(const std::vector<Job*>&)>;
  Batcher(Options options, Run run, Metrics& metrics, std::function<void()> on_start = {});
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a job; false (the job untouched) when the queue is full or the batcher stopped.
  bool submit(const std::shared_ptr<Job>& job);
  // Runs everything queued, then ends the inference thread; later submits are refused.
  void stop();

 private:
  void loop();

  Options options_;
  Run run_;
  Metrics& metrics_;
  std::function<void()> on_start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gmlp::serve
