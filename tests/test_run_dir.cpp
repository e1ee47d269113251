// The run folder (train/run_dir.h): an epoch's files commit together, a kill at every step of a
// commit leaves a folder that opens at one complete epoch, the lock, the refusal of a folder that
// holds a run, --overwrite, stale temporaries, legacy folders, and the stop signals. The crash
// and signal cases run in a forked child, which dies as a kill -9 or a second Ctrl-C would end
// gmlp, and the parent reads what it left.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "files.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "train/run_dir.h"

namespace gmlp {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::tmp_path;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// Epoch e's files: the state and checkpoint grow with e (so a torn write cannot pass for
// another epoch), and the metrics name the epoch.
std::map<std::string, std::string> epoch_files(int e) {
  return {{"train_state.safetensors", std::string(size_t(3000 + 100 * e), char('s' + e))},
          {"checkpoint.safetensors", std::string(size_t(5000 + 100 * e), char('c' + e))},
          {"metrics.jsonl", cat("{\"epoch\": ", e, "}\n")}};
}

void commit(RunDir& run, int e) {
  std::vector<EpochFile> files;
  for (const auto& [name, bytes] : epoch_files(e))
    files.push_back({name, [bytes = bytes](const std::string& path) { write_file_atomic(path, bytes); }});
  run.commit(e, files);
}

// The folder holds epoch e's files exactly, its manifest and nothing else of ours.
void expect_epoch(const std::string& dir, int e) {
  std::set<std::string> want = {"run.json"};
  for (const auto& [name, bytes] : epoch_files(e)) {
    want.insert(name);
    EXPECT_EQ(slurp(fs::path(dir) / name), bytes) << name << " is not epoch " << e << "'s";
  }
  std::set<std::string> got = names_in(dir);
  got.erase(".lock");  // a killed holder's lock file stays; the next holder takes it over
  EXPECT_EQ(got, want);
}

// Runs f in a child process and returns its wait status.
template <class F>
int in_child(F&& f) {
  const pid_t pid = fork();
  if (pid == 0) {
    f();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(RunDir, CommitPublishesTheEpochAndItsManifest) {
  const std::string dir = tmp_path("run");
  {
    RunDir run(dir, "train", RunStart::fresh);
    EXPECT_EQ(run.epoch(), 0);
    commit(run, 1);
    commit(run, 2);
    EXPECT_EQ(run.epoch(), 2);
    EXPECT_TRUE(fs::exists(fs::path(dir) / ".lock"));
  }
  EXPECT_FALSE(fs::exists(fs::path(dir) / ".lock"));  // released
  expect_epoch(dir, 2);
  const RunDir again(dir, "train", RunStart::resume);
  EXPECT_EQ(again.epoch(), 2);
}

TEST(RunDir, ANewRunRefusesAFolderThatHoldsOne) {
  const std::string dir = tmp_path("run");
  {
    RunDir run(dir, "pretrain", RunStart::fresh);
    commit(run, 1);
    commit(run, 2);
  }
  expect_error([&] { RunDir(dir, "train", RunStart::fresh); },
               {"'" + dir + "' holds a gmlp pretrain run of 2 epochs", "gmlp pretrain --resume " + dir, "--overwrite"});
  expect_epoch(dir, 2);  // untouched
  {
    const RunDir over(dir, "train", RunStart::overwrite);
    EXPECT_EQ(over.epoch(), 0);
    EXPECT_EQ(names_in(dir), std::set<std::string>{".lock"});
  }
  EXPECT_TRUE(fs::is_directory(dir));  // it was there before: kept, empty
  EXPECT_TRUE(fs::is_empty(dir));
  const RunDir fresh(dir, "train", RunStart::fresh);  // no run left to refuse
}

TEST(RunDir, ResumeNeedsAFinishedEpoch) {
  const std::string dir = tmp_path("run");
  expect_error([&] { RunDir(dir, "train", RunStart::resume); }, {"'" + dir + "' does not exist"});
  EXPECT_FALSE(fs::exists(dir));
  fs::create_directories(dir);
  expect_error([&] { RunDir(dir, "train", RunStart::resume); }, {"'" + dir + "' holds no finished epoch"});
}

TEST(RunDir, AFolderMadeForARunThatSavedNothingIsRemoved) {
  const std::string dir = tmp_path("run");
  { const RunDir run(dir, "train", RunStart::fresh); }
  EXPECT_FALSE(fs::exists(dir));
  fs::create_directories(dir);  // one that was there stays
  { const RunDir run(dir, "train", RunStart::fresh); }
  EXPECT_TRUE(fs::is_directory(dir));
}

TEST(RunDir, ASecondProcessGetsTheFolderAndTheHoldersPid) {
  const std::string dir = tmp_path("run");
  const RunDir run(dir, "train", RunStart::fresh);
  EXPECT_EQ(slurp(fs::path(dir) / ".lock"), cat(getpid(), "\n"));
  // flock locks belong to an open file, so a second open in this process is refused as another
  // process would be.
  expect_error([&] { RunDir(dir, "train", RunStart::resume); },
               {"'" + dir + "'", cat("another gmlp process (pid ", getpid(), ") is running in it")});
  expect_error([&] { FolderLock lock(dir); }, {cat("pid ", getpid())});
}

TEST(RunDir, StaleTemporariesAreRemovedOnOpening) {
  const std::string dir = tmp_path("run");
  {
    RunDir run(dir, "train", RunStart::fresh);
    commit(run, 1);
  }
  for (const char* name : {"checkpoint.safetensors.tmp.123", "metrics.jsonl.tmp.99999",
                           "checkpoint.safetensors.epoch-2", "train_state.safetensors.epoch-7", "notes.txt"})
    std::ofstream(fs::path(dir) / name) << "x";
  const RunDir run(dir, "train", RunStart::resume);
  EXPECT_EQ(run.epoch(), 1);
  std::set<std::string> want = {".lock", "run.json", "notes.txt"};  // not ours: kept
  for (const auto& [name, bytes] : epoch_files(1)) want.insert(name);
  EXPECT_EQ(names_in(dir), want);
}

TEST(RunDir, AFolderWithoutManifestIsARunOfItsStatesEpoch) {
  const std::string dir = tmp_path("run");
  fs::create_directories(dir);
  const float m = 0;
  st::save((fs::path(dir) / "train_state.safetensors").string(), {{"adamw.m", {1}, &m}},
           {{"epoch", "3"}, {"options", "{\"vocab_size\": 300, \"task\": \"genre\"}"}});
  expect_error([&] { RunDir(dir, "train", RunStart::fresh); }, {"holds a gmlp finetune run of 3 epochs"});
  RunDir run(dir, "finetune", RunStart::resume);
  EXPECT_EQ(run.epoch(), 3);
  commit(run, 4);  // the first commit writes the manifest
  expect_epoch(dir, 4);
}

TEST(RunDir, ADamagedManifestIsNamedAndOverwriteClearsIt) {
  const std::string dir = tmp_path("run");
  {
    RunDir run(dir, "train", RunStart::fresh);
    commit(run, 1);
  }
  fs::remove(fs::path(dir) / "checkpoint.safetensors");
  expect_error([&] { RunDir(dir, "train", RunStart::resume); },
               {"its manifest lists 'checkpoint.safetensors' for epoch 1, but the file is missing"});
  std::ofstream(fs::path(dir) / "run.json") << "{\"format\": \"gmlp-run\", \"epoch\": 1, \"command\": \"train\", "
                                               "\"files\": [\"../outside\"]}";
  expect_error([&] { RunDir(dir, "train", RunStart::fresh); },
               {"run.json' lists a file name that is not a plain name"});
  const RunDir over(dir, "train", RunStart::overwrite);
  EXPECT_EQ(names_in(dir), std::set<std::string>{".lock"});
}

// A kill at every step of two commits, each followed by what the next gmlp would do: open the
// folder, find one complete epoch (the previous one, or the new one from the instant its
// manifest is in place), and commit the rest; the end is the same folder as without the kill.
TEST(RunDir, AKillAtEveryStepOfACommitLeavesOneCompleteEpoch) {
  int steps = 0;
  std::set<int> seen;
  for (int n = 1; n < 1000; ++n) {
    const std::string dir = tmp_path(cat("run", n));
    const int status = in_child([&] {
      setenv("GMLP_TEST_CRASH_AT", std::to_string(n).c_str(), 1);
      RunDir run(dir, "train", RunStart::fresh);
      commit(run, 1);
      commit(run, 2);
    });
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      steps = n - 1;
      expect_epoch(dir, 2);
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "step " << n << ": status " << status;
    int held = 0;
    {
      const RunDir found(dir, "train", RunStart::inspect);
      held = found.epoch();
    }
    seen.insert(held);
    if (held > 0)
      expect_epoch(dir, held);
    else
      for (const std::string& name : names_in(dir)) EXPECT_EQ(name, ".lock") << "step " << n;
    RunDir run(dir, "train", held > 0 ? RunStart::resume : RunStart::fresh);
    for (int e = held + 1; e <= 2; ++e) commit(run, e);
    expect_epoch(dir, 2);
  }
  // Per file: write, fsync, rename, folder fsync; then the manifest's four; then the renames
  // and a folder fsync. Twice.
  EXPECT_EQ(steps, 2 * (3 * 4 + 4 + 3 + 1));
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
}

TEST(RunDir, StopSignalsSetAFlagThatCheckStopTurnsIntoInterrupted) {
  const std::string dir = tmp_path("run");
  // In a child: the first SIGINT is a request, the second ends the process at once. The child
  // starts as a foreground command does, with SIGINT's default action: a test binary started as
  // a script's background job inherits SIGINT ignored, which stays ignored (below).
  const int status = in_child([&] {
    std::signal(SIGINT, SIG_DFL);
    RunDir run(dir, "pretrain", RunStart::fresh);
    commit(run, 1);
    run.check_stop(5);  // nothing yet
    std::raise(SIGINT);
    try {
      run.check_stop(5);
      _exit(3);
    } catch (const Interrupted& stop) {
      if (stop.signal != SIGINT || stop.epoch != 1 || stop.epochs != 5 || stop.dir != dir || stop.command != "pretrain")
        _exit(4);
    }
    std::raise(SIGINT);
    _exit(5);
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  // SIGTERM too; and once the scope ends, the default action is back.
  const int term = in_child([&] {
    std::signal(SIGTERM, SIG_DFL);
    {
      const StopSignals signals;
      std::raise(SIGTERM);
      if (StopSignals::received() != SIGTERM) _exit(3);
    }
    std::raise(SIGTERM);
    _exit(4);
  });
  EXPECT_TRUE(WIFSIGNALED(term) && WTERMSIG(term) == SIGTERM) << "status " << term;
  // A SIGINT that was ignored (a script's background job) stays ignored.
  const int ignored = in_child([&] {
    std::signal(SIGINT, SIG_IGN);
    const StopSignals signals;
    std::raise(SIGINT);
    _exit(StopSignals::received() == 0 ? 0 : 3);
  });
  EXPECT_TRUE(WIFEXITED(ignored) && WEXITSTATUS(ignored) == 0) << "status " << ignored;
}

}  // namespace
}  // namespace gmlp
