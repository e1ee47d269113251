// gmlp serve without sockets (src/serve/): the KServe v2 request parsing (flat and nested data,
// binary tensors, the errors a client gets), the /v1 text requests, the dynamic batcher's
// batches (max rows, the delay, one kind per batch, a full queue, draining on stop) and the engine
// on a batch equal to each request run alone. tests/serve_test.py drives the real server.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "files.h"
#include "nn/model.h"
#include "serve/batcher.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/protocol.h"
#include "tolerances.h"
#include "train/checkpoint.h"

namespace gmlp::serve {
namespace {

ModelSpec image_spec() {
  ModelSpec m;
  m.name = "m";
  m.task = Task::image;
  m.channels = 1, m.image_size = 2, m.num_classes = 3;
  return m;
}

ModelSpec text_spec() {
  ModelSpec m;
  m.name = "t";
  m.task = Task::fill_mask;
  m.seq_len = 4, m.vocab_size = 10;
  return m;
}

// The status and message of the RequestError that f throws.
template <class F>
std::pair<int, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const RequestError& e) {
    return {e.status, e.what()};
  }
  return {0, "no error"};
}

TEST(ServeProtocol, FlatAndNestedDataParseAlike) {
  const std::string flat =
      R"({"id":"a","inputs":[{"name":"input","datatype":"FP32","shape":[2,1,2,2],"data":[1,2,3,4,5,6,7,8]}]})";
  const std::string nested =
      R"({"inputs":[{"name":"input","datatype":"FP32","shape":[2,1,2,2],"data":[[[[1,2],[3,4]]],[[[5,6],[7,8]]]]}]})";
  const InferRequest a = parse_infer(flat, kNoBinary, image_spec(), 4),
                     b = parse_infer(nested, kNoBinary, image_spec(), 4);
  EXPECT_EQ(a.rows, 2);
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.pixels, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(ServeProtocol, BinaryTensorsInAndOut) {
  const std::string header =
      R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,2,2],"parameters":{"binary_data_size":16}}],)"
      R"("outputs":[{"name":"logits","parameters":{"binary_data":true}}]})";
  const float px[4] = {0.25f, 0.5f, 0.75f, 1};
  std::string body = header + std::string(reinterpret_cast<const char*>(px), sizeof px);
  const InferRequest r = parse_infer(body, header.size(), image_spec(), 4);
  EXPECT_EQ(r.pixels, std::vector<float>(px, px + 4));
  EXPECT_TRUE(r.binary_output);
  size_t json_size = 0;
  const std::vector<float> logits = {1.5f, -2, 3};
  const std::string out = infer_response(image_spec(), r, logits, &json_size);
  ASSERT_EQ(out.size(), json_size + 12);
  EXPECT_EQ(std::memcmp(out.data() + json_size, logits.data(), 12), 0);
  const auto head = nlohmann::json::parse(out.substr(0, json_size));
  EXPECT_EQ(head["outputs"][0]["parameters"]["binary_data_size"], 12);
  EXPECT_EQ(head["outputs"][0]["shape"], nlohmann::json({1, 3}));
  // Bytes left over after the declared tensors, or too few, are the client's mistake.
  EXPECT_EQ(error_of([&] { parse_infer(body + "x", header.size(), image_spec(), 4); }).first, 400);
  EXPECT_EQ(error_of([&] { parse_infer(body.substr(0, body.size() - 1), header.size(), image_spec(), 4); }).first, 400);
}

TEST(ServeProtocol, ClientMistakesAre400WithWhatWasExpectedAndFound) {
  auto err = [](const std::string& body, const ModelSpec& m = image_spec()) {
    return error_of([&] { parse_infer(body, kNoBinary, m, 4); });
  };
  EXPECT_EQ(err("{\"inputs\": ["), std::make_pair(400, err("{\"inputs\": [").second));
  EXPECT_NE(err("{\"inputs\": [").second.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(err("{\"inputs\": 1e400}").first, 400);  // a number past double's range (found by fuzz_serve)
  const auto shape = err(R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,3,2,2],"data":[]}]})");
  EXPECT_EQ(shape.first, 400);
  EXPECT_NE(shape.second.find("expected shape [B, 1, 2, 2], found [1, 3, 2, 2]"), std::string::npos) << shape.second;
  const auto dtype = err(R"({"inputs":[{"name":"input","datatype":"FP16","shape":[1,1,2,2],"data":[1,2,3,4]}]})");
  EXPECT_NE(dtype.second.find("expected datatype FP32, found \"FP16\""), std::string::npos) << dtype.second;
  const auto count = err(R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,2,2],"data":[1,2,3]}]})");
  EXPECT_NE(count.second.find("holds 3 elements, but its shape says 4"), std::string::npos) << count.second;
  const auto batch = err(R"({"inputs":[{"name":"input","datatype":"FP32","shape":[5,1,2,2],"data":[]}]})");
  EXPECT_NE(batch.second.find("a batch of 5, more than the server's --max-batch 4"), std::string::npos) << batch.second;
  const auto id =
      err(R"({"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,2],"data":[2,10]}]})", text_spec());
  EXPECT_NE(id.second.find("token id 10 at element 1 is outside the vocabulary 0..9"), std::string::npos) << id.second;
  const auto tokens =
      err(R"({"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,5],"data":[1,1,1,1,1]}]})", text_spec());
  EXPECT_NE(tokens.second.find("5 tokens per sequence, but the model reads at most 4"), std::string::npos)
      << tokens.second;
  // A name with a newline stays one line in the message.
  const auto name = err("{\"inputs\":[{\"name\":\"in\\nput\",\"datatype\":\"FP32\",\"shape\":[1,1,2,2],\"data\":[]}]}");
  EXPECT_EQ(name.second.find('\n'), std::string::npos);
}

TEST(ServeProtocol, ErrorBodyHasCodeMessageAndType) {
  const auto e = nlohmann::json::parse(error_body(413, "too big"));
  EXPECT_EQ(e, nlohmann::json::parse(R"({"error":{"code":413,"message":"too big","type":"payload_too_large_error"}})"));
}

TEST(ServeProtocol, TextRequestsAsThePipelinesTakeThem) {
  TextRequest one = parse_text_request(R"({"inputs": "a [MASK]", "parameters": {"top_k": 2}})", 5, 4);
  EXPECT_FALSE(one.list);
  EXPECT_EQ(one.texts, std::vector<std::string>{"a [MASK]"});
  EXPECT_EQ(one.top, 2);
  TextRequest pairs = parse_text_request(R"({"inputs": [{"text": "a", "text_pair": "b"}]})", 5, 4);
  EXPECT_TRUE(pairs.list);
  EXPECT_EQ(pairs.pairs, std::vector<std::string>{"b"});
  EXPECT_EQ(error_of([] { parse_text_request(R"({"inputs": ["a", {"text": "a", "text_pair": "b"}]})", 5, 4); }).first,
            400);
  EXPECT_EQ(error_of([] { parse_text_request(R"({"inputs": ["a","b","c","d","e"]})", 5, 4); }).first, 400);
  EXPECT_EQ(error_of([] { parse_top("0", 10); }).first, 400);
  EXPECT_EQ(parse_top("10", 10), 10);
}

// A batcher whose run records each batch's row count, optionally held until released.
struct Recorder {
  Metrics metrics;
  std::mutex mutex;
  std::vector<int64_t> batches;
  std::atomic<bool> hold{false};
  Batcher::Run run() {
    return [this](const std::vector<Job*>& jobs) {
      while (hold) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      int64_t rows = 0;
      for (const Job* j : jobs) {
        rows += j->rows;
        EXPECT_EQ(j->op, jobs[0]->op);
      }
      const std::lock_guard lock(mutex);
      batches.push_back(rows);
    };
  }
};

std::shared_ptr<Job> job(int64_t rows, Job::Op op = Job::Op::logits) {
  auto j = std::make_shared<Job>();
  j->rows = rows;
  j->op = op;
  return j;
}

TEST(ServeBatcher, FillsBatchesUpToMaxRowsWithinTheDelay) {
  Recorder rec;
  // A long delay: the first batch waits for the jobs below, which all arrive within it.
  Batcher b({.max_batch = 4, .max_delay_us = 200000, .max_queue = 16}, rec.run(), rec.metrics);
  std::vector<std::shared_ptr<Job>> jobs = {job(1), job(2), job(1), job(3), job(1, Job::Op::fill_mask)};
  std::vector<std::future<void>> done;
  for (auto& j : jobs) {
    done.push_back(j->done.get_future());
    ASSERT_TRUE(b.submit(j));
  }
  for (auto& d : done) d.wait();
  // 1 + 2 + 1 = 4 rows; 3 does not fit beside them; the fill_mask job is another kind.
  EXPECT_EQ(rec.batches, (std::vector<int64_t>{4, 3, 1}));
  EXPECT_EQ(rec.metrics.exec_count, 3u);
  EXPECT_EQ(rec.metrics.inference_count, 8u);
}

TEST(ServeBatcher, AFullQueueRefusesAndStopDrains) {
  Recorder rec;
  rec.hold = true;
  Batcher b({.max_batch = 1, .max_delay_us = 0, .max_queue = 2}, rec.run(), rec.metrics);
  auto first = job(1);
  ASSERT_TRUE(b.submit(first));
  while (rec.metrics.deferred != 0) std::this_thread::yield();  // the first is running (held)
  auto a = job(1), c = job(1), d = job(1);
  EXPECT_TRUE(b.submit(a));
  EXPECT_TRUE(b.submit(c));
  EXPECT_FALSE(b.submit(d));  // two queued: full
  EXPECT_EQ(rec.metrics.deferred, 2);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rec.hold = false;
  });
  b.stop();  // runs the two queued before returning
  release.join();
  EXPECT_EQ(rec.batches.size(), 3u);
  EXPECT_FALSE(b.submit(job(1)));  // stopped
}

TEST(ServeEngine, ABatchEqualsEachRequestRunAlone) {
  ModelConfig config;
  config.img_size = 12, config.patch_size = 4, config.depth = 2, config.dim = 16, config.ffn = 32;
  config.num_classes = 5;
  auto model = make_model<float>(config);
  Rng rng(7);
  model->init(rng);
  for (int64_t i = 0; i < model->num_params(); ++i) model->weights()[i] += 0.05f * float(rng.normal());
  const std::string path = test::tmp_path("serve_engine.safetensors");
  save_checkpoint(path, *model, data::Normalization::gmlp_default(1), {"a", "b", "c", "d", "e"});
  Engine engine(path, "");
  EXPECT_EQ(engine.spec().name, std::filesystem::path(path).stem().string());  // named after the file
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<Job*> batch;
  for (int64_t rows : {1, 3, 2}) {
    jobs.push_back(job(rows));
    for (int64_t i = 0; i < rows * 144; ++i) jobs.back()->pixels.push_back(float(rng.uniform()));
    batch.push_back(jobs.back().get());
  }
  engine.run(batch);
  for (const auto& j : jobs) {
    Job alone = Job();
    alone.rows = j->rows;
    alone.pixels = j->pixels;
    engine.run({&alone});
    ASSERT_EQ(j->error_status, 0) << j->error;
    ASSERT_EQ(alone.logits.size(), j->logits.size());
    for (size_t i = 0; i < alone.logits.size(); ++i) EXPECT_NEAR(alone.logits[i], j->logits[i], tol::kInvariance) << i;
  }
  // An image request's body that is no image: 400 naming the format found.
  const auto e = error_of([&] { engine.image_input("GIF89a"); });
  EXPECT_EQ(e.first, 400);
  EXPECT_NE(e.second.find("unknown image format"), std::string::npos) << e.second;
}

}  // namespace
}  // namespace gmlp::serve
