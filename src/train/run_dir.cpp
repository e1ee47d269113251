// The run folder's lock, epoch commits, recovery and stop signals (run_dir.h), with POSIX calls:
// flock(2), sigaction(2), rename(2) and fsync(2) through io/atomic_file.h.
#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dist/communicator.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace gmlp {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "run.json";
constexpr const char* kLockFile = ".lock";
constexpr size_t kMaxManifestBytes = size_t{1} << 16;
// A folder from before the manifest: its state file marks a run, and these are its files.
constexpr const char* kLegacyState = "train_state.safetensors";
constexpr const char* kLegacyFiles[] = {"train_state.safetensors", "checkpoint.safetensors",
                                        "checkpoint_ema.safetensors", "metrics.jsonl"};

// --- stop signals -------------------------------------------------------------------------------

std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");
int signal_scopes = 0;
struct sigaction old_int, old_term;
bool own_int = false, own_term = false;

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  stop_signal.compare_exchange_strong(none, sig);  // the first signal names the stop
}

// Installs on_stop_signal for `sig` unless it is ignored; true when installed.
bool install(int sig, struct sigaction* old) {
  if (sigaction(sig, nullptr, old) != 0 || old->sa_handler == SIG_IGN) return false;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_RESETHAND;  // a second signal: the default action, at once
  return sigaction(sig, &sa, nullptr) == 0;
}

// --- names in the folder ------------------------------------------------------------------------

// NAME.tmp.PID, a write_file_atomic that did not finish.
bool is_temporary(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0 || at + 5 == name.size()) return false;
  return std::all_of(name.begin() + long(at) + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string staged_name(const std::string& name, int epoch) { return cat(name, ".epoch-", epoch); }

// NAME.epoch-E: sets name and epoch.
bool is_staged(const std::string& file, std::string* name, int* epoch) {
  const size_t at = file.rfind(".epoch-");
  if (at == std::string::npos || at == 0 || at + 7 == file.size() || file.size() - at > 16) return false;
  for (size_t i = at + 7; i < file.size(); ++i)
    if (file[i] < '0' || file[i] > '9') return false;
  *name = file.substr(0, at);
  *epoch = std::stoi(file.substr(at + 7));
  return true;
}

// A file name a manifest may list: no folders, nothing hidden, none of ours.
bool plain_name(const std::string& name) {
  return !name.empty() && name.size() < 256 && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name != kManifest && !is_temporary(name);
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string epochs_str(int n) { return cat(n, n == 1 ? " epoch" : " epochs"); }

}  // namespace

// --- StopSignals ------------------------------------------------------------------------------

StopSignals::StopSignals() {
  if (signal_scopes++ > 0) return;
  stop_signal = 0;
  own_int = install(SIGINT, &old_int);
  own_term = install(SIGTERM, &old_term);
}

StopSignals::~StopSignals() {
  if (--signal_scopes > 0) return;
  if (own_int) sigaction(SIGINT, &old_int, nullptr);
  if (own_term) sigaction(SIGTERM, &old_term, nullptr);
  own_int = own_term = false;
}

int StopSignals::received() { return stop_signal.load(); }

int StopSignals::received_anywhere() {
  dist::Communicator& comm = dist::world();
  const int mine = received();
  if (comm.size() == 1) return mine;
  double asked[2] = {double(mine == SIGINT), double(mine != 0 && mine != SIGINT)};
  comm.sum(asked, 2);
  return asked[0] > 0 ? SIGINT : asked[1] > 0 ? SIGTERM : 0;
}

// --- FolderLock -------------------------------------------------------------------------------

FolderLock::FolderLock(const std::string& dir) : path_((fs::path(dir) / kLockFile).string()) {
  for (;;) {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("failed to use folder '", dir, "': cannot create '", path_, "': ", std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char pid[32] = {};
      const ssize_t n = pread(fd_, pid, sizeof pid - 1, 0);
      close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK) fail("failed to use folder '", dir, "': cannot lock '", path_, "': ", std::strerror(err));
      const std::string holder = n > 0 ? std::string(pid, size_t(n)) : std::string();
      const size_t end = holder.find_first_not_of("0123456789");
      fail("failed to use folder '", dir, "': another gmlp process (pid ",
           holder.empty() || end == 0 ? "unknown" : holder.substr(0, end),
           ") is running in it; wait for it to end, or stop it");
    }
    // The holder before us removes the file on release: if it did while we opened it, we hold
    // a lock on a file no longer in the folder, and take the new one.
    struct stat held {
    }, named{};
    if (fstat(fd_, &held) == 0 && stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    close(fd_);
  }
  const std::string pid = cat(getpid(), "\n");
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size()))
    fail("failed to use folder '", dir, "': cannot write '", path_, "': ", std::strerror(errno));
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  unlink(path_.c_str());
  close(fd_);
}

// --- RunDir -----------------------------------------------------------------------------------

bool remove_temporaries(const std::string& dir) {
  std::error_code ec;
  bool removed = false;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (is_temporary(e.path().filename().string())) stale.push_back(e.path());
  for (const fs::path& p : stale) removed |= fs::remove(p, ec);
  return removed;
}

RunDir::RunDir(std::string dir, std::string command, RunStart start)
    : dir_(std::move(dir)), command_(std::move(command)) {
  dist::Communicator& comm = dist::world();
  if (comm.size() == 1 || start == RunStart::inspect) {
    open(start);
    return;
  }
  // A data-parallel run: rank 0 alone takes, repairs and writes the folder; the others wait until
  // it has, learn its epoch, and write nothing.
  if (comm.rank() == 0) open(start);
  comm.barrier();
  int epoch = epoch_;
  comm.broadcast(&epoch, sizeof epoch, 0);
  if (comm.rank() != 0) {
    writer_ = false, epoch_ = epoch;
    signals_ = std::make_unique<StopSignals>();
  }
}

void RunDir::open(RunStart start) {
  std::error_code ec;
  const bool exists = fs::exists(dir_, ec);
  if (!exists && start == RunStart::resume) fail("failed to resume: '", dir_, "' does not exist");
  if (!exists && start == RunStart::inspect) return;
  if (exists && !fs::is_directory(dir_, ec)) fail("failed to use run folder '", dir_, "': it is not a folder");
  if (!exists) {
    fs::create_directories(dir_, ec);
    if (ec) fail("failed to create run folder '", dir_, "': ", ec.message());
    created_ = true;
  }
  try {
    lock_ = std::make_unique<FolderLock>(dir_);
    if (start == RunStart::overwrite) {
      try {  // a damaged folder is overwritten all the same
        recover();
      } catch (const Error&) {
        epoch_ = -1;
        files_.assign(std::begin(kLegacyFiles), std::end(kLegacyFiles));
      }
      if (epoch_ != 0) remove_run();
    } else {
      recover();
    }
    if (start == RunStart::fresh && epoch_ > 0)
      fail("'", dir_, "' holds a gmlp ", held_command_, " run of ", epochs_str(epoch_), ": continue it with gmlp ",
           held_command_, " --resume ", dir_, ", or start a new run over it with --overwrite");
    if (start == RunStart::resume && epoch_ == 0)
      fail("failed to resume: '", dir_, "' holds no finished epoch (no ", kManifest, " or ", kLegacyState, ")");
  } catch (...) {
    release();
    throw;
  }
  if (start != RunStart::inspect) signals_ = std::make_unique<StopSignals>();
}

RunDir::~RunDir() { release(); }

void RunDir::release() noexcept {
  signals_.reset();
  if (created_ && epoch_ == 0) {  // nothing of a run here: leave no folder behind
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  lock_.reset();
}

std::string RunDir::path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

void RunDir::recover() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) names.push_back(e.path().filename().string());
  if (ec) fail("failed to read run folder '", dir_, "': ", ec.message());
  bool changed = remove_temporaries(dir_);

  held_command_.clear();
  files_.clear();
  epoch_ = 0;
  const std::string manifest = path(kManifest);
  if (fs::exists(manifest)) {
    const auto bad = [&](const char* what) {
      fail("failed to read run folder '", dir_, "': '", manifest, "' ", what,
           " (expected {\"format\": \"gmlp-run\", \"command\", \"epoch\", \"files\"})");
    };
    const nlohmann::json m = nlohmann::json::parse(read_file(manifest, kMaxManifestBytes), nullptr, false);
    if (!m.is_object() || m.value("format", "") != "gmlp-run") bad("is not a run manifest");
    if (!m.contains("epoch") || !m["epoch"].is_number_integer() || m["epoch"].get<int64_t>() < 1 ||
        m["epoch"].get<int64_t>() > 1'000'000'000)
      bad("has no epoch >= 1");
    if (!m.contains("command") || !m["command"].is_string()) bad("has no command");
    if (!m.contains("files") || !m["files"].is_array() || m["files"].empty()) bad("lists no files");
    for (const auto& f : m["files"]) {
      if (!f.is_string() || !plain_name(f.get<std::string>())) bad("lists a file name that is not a plain name");
      files_.push_back(f.get<std::string>());
    }
    epoch_ = m["epoch"].get<int>();
    held_command_ = m["command"].get<std::string>();
  }
  // Staged files: the manifest's epoch goes into place (its commit was cut short), any other
  // is an epoch that was never committed.
  for (const std::string& name : names) {
    std::string base;
    int e = 0;
    if (!is_staged(name, &base, &e)) continue;
    if (e == epoch_ && contains(files_, base))
      rename_file(path(name), path(base));
    else
      fs::remove(path(name), ec);
    changed = true;
  }
  if (changed) sync_folder(dir_);
  for (const std::string& f : files_)
    if (!fs::exists(path(f)))
      fail("failed to read run folder '", dir_, "': its manifest lists '", f, "' for epoch ", epoch_,
           ", but the file is missing");

  if (epoch_ == 0 && fs::exists(path(kLegacyState))) {
    const st::File state = st::File::open(path(kLegacyState));
    const auto& meta = state.metadata();
    const auto it = meta.find("epoch");
    try {
      epoch_ = it == meta.end() ? 0 : std::stoi(it->second);
    } catch (const std::logic_error&) {
      epoch_ = 0;
    }
    if (epoch_ < 1)
      fail("failed to read run folder '", dir_, "': '", path(kLegacyState), "' has no epoch >= 1 in its metadata");
    const auto opts = meta.find("options");
    const nlohmann::json options =
        opts == meta.end() ? nlohmann::json() : nlohmann::json::parse(opts->second, nullptr, false);
    held_command_ = !options.is_object() || !options.contains("vocab_size") ? "train"
                    : options.value("task", "").empty()                     ? "pretrain"
                                                                            : "finetune";
    for (const char* f : kLegacyFiles)
      if (fs::exists(path(f))) files_.push_back(f);
  }
}

void RunDir::remove_run() {
  std::error_code ec;
  // The manifest first: from then on the folder holds no run, whatever remains of it.
  if (fs::remove(path(kManifest), ec)) sync_folder(dir_);
  for (const std::string& f : files_) fs::remove(path(f), ec);
  for (const char* f : kLegacyFiles) fs::remove(path(f), ec);
  sync_folder(dir_);
  epoch_ = 0;
  files_.clear();
}

void RunDir::commit(int epoch, const std::vector<EpochFile>& files) {
  GMLP_CHECK(epoch > epoch_ && !files.empty());
  if (!writer_) {
    epoch_ = epoch;
    return;
  }
  const CrashTest crash_test;
  std::vector<std::string> names;
  try {
    for (const EpochFile& f : files) {
      GMLP_CHECK(plain_name(f.name) && !contains(names, f.name));
      names.push_back(f.name);
      f.write(path(staged_name(f.name, epoch)));
    }
  } catch (...) {
    std::error_code ec;
    for (const std::string& name : names) fs::remove(path(staged_name(name, epoch)), ec);
    throw;
  }
  const nlohmann::json manifest = {{"format", "gmlp-run"}, {"command", command_}, {"epoch", epoch}, {"files", names}};
  write_file_atomic(path(kManifest), manifest.dump() + "\n");  // the commit
  const std::vector<std::string> before = files_;
  epoch_ = epoch, files_ = names;
  for (const std::string& name : names) rename_file(path(staged_name(name, epoch)), path(name));
  std::error_code ec;
  for (const std::string& name : before)
    if (!contains(names, name)) fs::remove(path(name), ec);
  sync_folder(dir_);
}

void RunDir::check_stop(int epochs) const {
  if (!signals_) return;
  const int sig = StopSignals::received_anywhere();
  if (!sig) return;
  Interrupted stop;
  stop.signal = sig, stop.dir = dir_, stop.command = command_, stop.epoch = epoch_, stop.epochs = epochs;
  throw stop;
}

}  // namespace gmlp
