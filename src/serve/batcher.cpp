// The dynamic batcher (batcher.h).
#include "serve/batcher.h"

#include "core/error.h"

namespace gmlp::serve {

using Clock = std::chrono::steady_clock;

Batcher::Batcher(Options options, Run run, Metrics& metrics, std::function<void()> on_start)
    : options_(options), run_(std::move(run)), metrics_(metrics), on_start_(std::move(on_start)) {
  GMLP_CHECK(options_.max_batch >= 1 && options_.max_delay_us >= 0);
  thread_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() { stop(); }

bool Batcher::submit(const std::shared_ptr<Job>& job) {
  {
    const std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= options_.max_queue) return false;
    job->queued = Clock::now();
    queue_.push_back(job);
    ++metrics_.deferred;
  }
  wake_.notify_one();
  return true;
}

void Batcher::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Batcher::loop() {
  if (on_start_) on_start_();
  std::vector<std::shared_ptr<Job>> batch;
  std::vector<Job*> jobs;
  for (;;) {
    batch.clear();
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      batch.push_back(queue_.front());
      queue_.pop_front();
      int64_t rows = batch[0]->rows;
      const Job::Op op = batch[0]->op;
      const auto deadline = batch[0]->queued + std::chrono::microseconds(options_.max_delay_us);
      while (rows < options_.max_batch) {
        if (queue_.empty()) {
          if (stopping_ || Clock::now() >= deadline) break;
          wake_.wait_until(lock, deadline, [&] { return stopping_ || !queue_.empty(); });
          continue;
        }
        const std::shared_ptr<Job>& next = queue_.front();
        if (next->op != op || rows + next->rows > options_.max_batch) break;
        rows += next->rows;
        batch.push_back(next);
        queue_.pop_front();
      }
      metrics_.deferred -= int64_t(batch.size());
    }
    const auto start = Clock::now();
    jobs.clear();
    int64_t rows = 0;
    for (const auto& job : batch) {
      metrics_.queue_seconds.observe(std::chrono::duration<double>(start - job->queued).count());
      jobs.push_back(job.get());
      rows += job->rows;
    }
    try {
      run_(jobs);
    } catch (const std::exception& e) {  // run_ answers each job itself; this is a bug's last resort
      for (Job* job : jobs)
        if (!job->error_status) job->error_status = 500, job->error = cat("inference failed: ", e.what());
    }
    metrics_.compute_seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
    ++metrics_.exec_count;
    metrics_.inference_count += uint64_t(rows);
    for (const auto& job : batch) {
      ++(job->error_status ? metrics_.inference_failure : metrics_.inference_success);
      job->done.set_value();
    }
  }
}

}  // namespace gmlp::serve
