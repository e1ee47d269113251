#include "train/run_files.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace gmlp {

namespace fs = std::filesystem;

RunFiles::RunFiles(const std::string& dir)
    : checkpoint((fs::path(dir) / kCheckpoint).string()),
      state((fs::path(dir) / kState).string()),
      metrics((fs::path(dir) / kMetrics).string()),
      ema((fs::path(dir) / kEma).string()) {}

uint64_t epoch_seed(uint64_t seed, int epoch) {
  return seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull * uint64_t(epoch + 1);
}

std::string training_summary(const nlohmann::json& options, const std::vector<nlohmann::json>& metrics) {
  // "test_acc", and the moving average's "test_acc_ema".
  auto ends = [](const std::string& key, const std::string& end) {
    return key.ends_with(end) || key.ends_with(end + "_ema");
  };
  auto figure = [&](const std::string& key) {
    for (const char* end : {"_acc", "_loss", "_ppl", "_count", "_total", "_pairs", "_tokens"})
      if (ends(key, end)) return true;
    return key == "task";
  };
  nlohmann::json last = nlohmann::json::object(), best = nlohmann::json::object();
  for (const nlohmann::json& row : metrics)
    for (auto it = row.begin(); it != row.end(); ++it)
      if (ends(it.key(), "_acc") && it->is_number() &&
          (!best.contains(it.key()) || it->get<double>() > best[it.key()].get<double>()))
        best[it.key()] = *it;
  if (!metrics.empty())
    for (auto it = metrics.back().begin(); it != metrics.back().end(); ++it)
      if (figure(it.key())) last[it.key()] = *it;
  return nlohmann::json{{"epochs", metrics.size()}, {"options", options}, {"last", last}, {"best", best}}.dump();
}

void save_epoch(RunDir& run, AdamW<float>& opt, const RunState& s, const std::vector<nlohmann::json>& metrics,
                std::vector<EpochFile> checkpoints) {
  const int64_t P = int64_t(opt.m().size());
  const std::map<std::string, std::string> meta = {{"epoch", std::to_string(s.epoch)},
                                                   {"step", std::to_string(s.step)},
                                                   {"options", s.options.dump()},
                                                   {"adamw_steps", std::to_string(opt.steps())}};
  std::vector<EpochFile> files;
  files.push_back({RunFiles::kState, [&](const std::string& path) {
                     st::save(path, {{"adamw.m", {P}, opt.m().data()}, {"adamw.v", {P}, opt.v().data()}}, meta);
                   }});
  for (EpochFile& f : checkpoints) files.push_back(std::move(f));
  files.push_back({RunFiles::kMetrics, [&](const std::string& path) {
                     std::string lines;
                     for (const auto& m : metrics) lines += m.dump() + "\n";
                     write_file_atomic(path, lines);
                   }});
  run.commit(s.epoch, files);
}

RunState read_run_state(const RunFiles& files, std::vector<nlohmann::json>* metrics) {
  if (!fs::exists(files.state))
    fail("failed to resume: '", files.state, "' does not exist (no finished epoch to resume from)");
  const st::File state = st::File::open(files.state);
  auto at = [&](const std::string& key) {
    auto it = state.metadata().find(key);
    if (it == state.metadata().end())
      fail("failed to resume from '", files.state, "': metadata '", key, "' is missing");
    return it->second;
  };
  RunState s;
  try {
    s.options = nlohmann::json::parse(at("options"));
    s.epoch = std::stoi(at("epoch"));
    s.step = std::stoll(at("step"));
    s.adamw_steps = std::stoll(at("adamw_steps"));
  } catch (const nlohmann::json::exception&) {
    fail("failed to resume from '", files.state, "': metadata 'options' is malformed");
  } catch (const std::logic_error&) {
    fail("failed to resume from '", files.state, "': metadata 'epoch'/'step' is not a number");
  }
  s.m = state.read_f32("adamw.m");
  s.v = state.read_f32("adamw.v");
  if (metrics && fs::exists(files.metrics))
    for (auto& j : read_metrics(files.metrics))
      if (j.value("epoch", 0) <= s.epoch) metrics->push_back(std::move(j));
  return s;
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("failed to read '", path, "': cannot open it");
  std::vector<nlohmann::json> rows;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("epoch"))
      fail("failed to read '", path, "': line ", line_no, " is not a JSON object with an \"epoch\"");
    rows.push_back(std::move(j));
  }
  return rows;
}

}  // namespace gmlp

namespace gmlp {
void restore_moments(const RunFiles& files, const RunState& s, AdamW<float>& opt) {
  const size_t n = opt.m().size();
  if (s.m.size() != n || s.v.size() != n)
    fail("failed to resume from '", files.state, "': the AdamW moments have ", s.m.size(),
         " values, but the model has ", n, " parameters");
  std::copy(s.m.begin(), s.m.end(), opt.m().data());
  std::copy(s.v.begin(), s.v.end(), opt.v().data());
  opt.set_steps(s.adamw_steps);
}
}  // namespace gmlp
