// The model behind gmlp serve (engine.h), over the public API's classes.
#include "serve/engine.h"

#include <algorithm>
#include <filesystem>

#include "io/image.h"
#include "io/safetensors.h"
#include "text/tokenizer.h"
#include "train/checkpoint.h"

namespace gmlp::serve {

namespace {

// The default model name: the file's stem, or its folder's name for a run's checkpoint.safetensors.
std::string default_name(const std::string& checkpoint) {
  const std::filesystem::path p = std::filesystem::absolute(checkpoint);
  std::string name = p.stem().string();
  if (name == "checkpoint" && p.has_parent_path() && !p.parent_path().filename().empty())
    name = p.parent_path().filename().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return name.empty() ? "gmlp" : name;
}

nlohmann::json predictions_json(const std::vector<Prediction>& predictions, bool hf) {
  nlohmann::json list = nlohmann::json::array();
  for (const Prediction& p : predictions)
    list.push_back(hf ? nlohmann::json{{"label", p.name}, {"score", p.probability}}
                      : nlohmann::json{{"index", p.label}, {"label", p.name}, {"probability", p.probability}});
  return list;
}

}  // namespace

Engine::Engine(const std::string& checkpoint, const std::string& name) {
  spec_.name = name.empty() ? default_name(checkpoint) : name;
  bool text = false, classifier = false;
  {
    const st::File file = st::File::open(checkpoint);
    text = checkpoint_kind(file) == CheckpointKind::text;
    classifier = text && file.metadata().count("task");
  }
  if (classifier) {
    classifier_ = std::make_unique<TextClassifier>(checkpoint);
    spec_.task = Task::text_classifier;
    spec_.seq_len = classifier_->max_tokens();
    spec_.vocab_size = classifier_->vocab_size();
    spec_.num_classes = classifier_->num_classes();
    spec_.labels = classifier_->class_names();
  } else if (text) {
    mlm_ = std::make_unique<FillMask>(checkpoint);
    spec_.task = Task::fill_mask;
    spec_.seq_len = mlm_->max_tokens();
    spec_.vocab_size = mlm_->vocab_size();
  } else {
    image_ = std::make_unique<Classifier>(checkpoint);  // names what is wrong with any other file
    spec_.task = Task::image;
    spec_.channels = image_->channels();
    spec_.image_size = image_->image_size();
    spec_.num_classes = image_->num_classes();
    spec_.labels = image_->class_names();
  }
}

std::vector<std::string> Engine::notes() const { return image_ ? image_->notes() : std::vector<std::string>{}; }

std::vector<float> Engine::image_input(const std::string& bytes) const {
  if (!image_) reject(404, "the model '", spec_.name, "' classifies texts, not images");
  try {
    return img::image_input("request body", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                            spec_.channels, spec_.image_size, spec_.image_size);
  } catch (const Error& e) {
    reject(400, e.what());
  }
}

nlohmann::json Engine::top_classes(const float* logits, int top) const {
  GMLP_CHECK(image_);
  return predictions_json(image_->top_classes(logits, top), false);
}

void Engine::check_texts(const TextRequest& r, Job::Op op) const {
  if (op == Job::Op::fill_mask) {
    if (!mlm_) reject(404, "the model '", spec_.name, "' is not a masked-language model: /v1/fill-mask needs one");
    if (!r.pairs.empty()) reject(400, "fill-mask takes texts, not pairs");
    for (size_t i = 0; i < r.texts.size(); ++i) try {
        mlm_->check(r.texts[i]);
      } catch (const std::runtime_error& e) {
        reject(400, r.texts.size() > 1 ? cat("text ", i + 1, ": ") : std::string(), e.what());
      }
    return;
  }
  if (!classifier_) reject(404, "the model '", spec_.name, "' is not a text classifier: /v1/classify-text needs one");
  if (classifier_->takes_pairs() && r.pairs.empty())
    reject(400, "the model was finetuned on pairs of texts (", classifier_->task(),
           "): give {\"text\": ..., \"text_pair\": ...}");
  if (!classifier_->takes_pairs() && !r.pairs.empty())
    reject(400, "the model was finetuned on single texts (", classifier_->task(), "), not pairs");
}

std::vector<int32_t> Engine::tokens(const std::string& text, const std::string& pair) const {
  try {
    if (mlm_) return mlm_->tokens(text);
    if (classifier_) {
      if (classifier_->takes_pairs() != !pair.empty())
        reject(400, "the model was finetuned on ", classifier_->takes_pairs() ? "pairs of texts" : "single texts", " (",
               classifier_->task(), ")");
      return classifier_->tokens(text, pair);
    }
  } catch (const RequestError&) {
    throw;
  } catch (const std::runtime_error& e) {
    reject(400, e.what());
  }
  reject(404, "the model '", spec_.name, "' classifies images: it has no tokenizer");
}

void Engine::run_one(Job& job) {
  const size_t N = size_t(spec_.seq_len);
  switch (job.op) {
    case Job::Op::logits:
      if (image_) {
        job.logits = image_->logits(job.pixels.data(), int(job.rows));
      } else if (classifier_) {
        std::vector<int32_t> ids(size_t(job.rows) * N, text::Tokenizer::kPad);
        for (int64_t r = 0; r < job.rows; ++r)
          std::copy_n(job.ids.begin() + r * job.tokens, job.tokens, ids.begin() + r * int64_t(N));
        job.logits = classifier_->logits(ids.data(), int(job.rows));
      } else {
        job.logits.clear();
        for (int64_t r = 0; r < job.rows; ++r) {
          const std::vector<float> l = mlm_->logits(job.ids.data() + r * job.tokens, int(job.tokens));
          job.logits.insert(job.logits.end(), l.begin(), l.end());
        }
      }
      break;
    case Job::Op::fill_mask:
      job.result = nlohmann::json::array();
      for (const std::string& text : job.texts) {
        job.result.push_back(fill_mask_json(mlm_->fill(text, job.top)));
      }
      break;
    case Job::Op::classify_text: {
      const std::vector<std::vector<Prediction>> p = classifier_->classify(job.texts, job.top, job.pairs);
      job.result = nlohmann::json::array();
      for (const auto& one : p) job.result.push_back(predictions_json(one, true));
      break;
    }
  }
}

void Engine::run(const std::vector<Job*>& jobs) {
  if (jobs.empty()) return;
  auto run_alone = [&](Job& job) {
    try {
      run_one(job);
    } catch (const std::runtime_error& e) {  // the public API's errors (gmlp::Error among them)
      job.error_status = 400;
      job.error = e.what();
    }
  };
  const Job::Op op = jobs[0]->op;
  // Images and a classifier's sequences go through one forward pass; a failure there (which
  // validation should have prevented) is retried job by job, so that it stays the one job's.
  const bool together = jobs.size() > 1 && (op == Job::Op::classify_text || (op == Job::Op::logits && !mlm_));
  if (!together) {
    for (Job* job : jobs) run_alone(*job);
    return;
  }
  Job all;
  all.op = op;
  all.rows = 0;
  all.top = spec_.num_classes;
  all.tokens = op == Job::Op::logits && classifier_ ? int64_t(spec_.seq_len) : 0;
  const size_t N = size_t(spec_.seq_len);
  for (const Job* job : jobs) {
    all.rows += job->rows;
    all.pixels.insert(all.pixels.end(), job->pixels.begin(), job->pixels.end());
    all.texts.insert(all.texts.end(), job->texts.begin(), job->texts.end());
    all.pairs.insert(all.pairs.end(), job->pairs.begin(), job->pairs.end());
    if (classifier_ && op == Job::Op::logits)
      for (int64_t r = 0; r < job->rows; ++r) {  // each row padded to the model's length
        all.ids.insert(all.ids.end(), job->ids.begin() + r * job->tokens, job->ids.begin() + (r + 1) * job->tokens);
        all.ids.resize(all.ids.size() + N - size_t(job->tokens), text::Tokenizer::kPad);
      }
  }
  try {
    run_one(all);
  } catch (const std::runtime_error&) {
    for (Job* job : jobs) run_alone(*job);
    return;
  }
  size_t row = 0;
  for (Job* job : jobs) {
    if (op == Job::Op::logits) {
      const size_t K = size_t(spec_.num_classes);
      job->logits.assign(all.logits.begin() + row * K, all.logits.begin() + (row + size_t(job->rows)) * K);
    } else {
      job->result = nlohmann::json::array();
      for (int64_t r = 0; r < job->rows; ++r) {
        nlohmann::json list = all.result[row + size_t(r)];
        if (list.size() > size_t(job->top)) list.erase(list.begin() + job->top, list.end());
        job->result.push_back(list);
      }
    }
    row += size_t(job->rows);
  }
}

}  // namespace gmlp::serve
