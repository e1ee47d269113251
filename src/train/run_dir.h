// A run folder's life, shared by every trainer (train, pretrain, finetune; compare's runs):
//   - one process at a time: a flock(2) on DIR/.lock, which holds the owner's pid, for the
//     whole run; a second process fails at once, naming the folder and that pid;
//   - no silent replacement: a new run into a folder that holds one is refused unless it was
//     asked to overwrite it, and --resume of a folder without a finished epoch fails;
//   - each epoch committed as one step: its files (state, checkpoints, metrics) are written
//     under staged names NAME.epoch-E, each fsync'ed, then the manifest DIR/run.json is
//     replaced (temporary name, fsync, rename, folder fsync): that rename is the commit; then
//     every staged file is renamed over NAME. A crash before the commit leaves the previous
//     epoch complete (its staged files are removed when the folder is next opened), a crash
//     after it leaves staged files of the manifest's epoch, which opening renames into place.
//     So at every instant the folder holds one complete epoch, the manifest's, and --resume
//     continues from it exactly as if the run had not been stopped;
//   - temporaries (NAME.tmp.PID of write_file_atomic, stale staged files) are removed on opening;
//   - SIGINT and SIGTERM stop the run between two steps (check_stop), keeping the last committed
//     epoch; a second signal ends the process at once.
// A folder written before the manifest existed (train_state.safetensors and no run.json) is read
// as a run of its state's epoch; its first commit writes the manifest.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gmlp {

// What a run does with its folder. fresh: create it if needed; refuse one that holds a run.
// overwrite: the same, but remove the run it holds. resume: continue the run it holds (there
// must be one). inspect: read what it holds (creating nothing, refusing nothing).
enum class RunStart { fresh, overwrite, resume, inspect };

// One file of an epoch: its name in the folder and how to write it at a given path (with
// write_file_atomic, as st::save does).
struct EpochFile {
  std::string name;
  std::function<void(const std::string& path)> write;
};

// Thrown by RunDir::check_stop once SIGINT or SIGTERM has arrived; the CLI prints it as one line
// with the command that continues the run, and exits with 128 + signal.
struct Interrupted : std::exception {
  int signal = 0;       // SIGINT or SIGTERM
  std::string dir;      // the run folder
  std::string command;  // "train", "pretrain", "finetune"; "compare" once compare rethrows it
  int epoch = 0;        // the last epoch saved (0: none)
  int epochs = 0;       // the epochs the run was to reach
  const char* what() const noexcept override { return "interrupted"; }
};

// SIGINT and SIGTERM handlers for a scope (sigaction; the handler only sets an atomic flag and
// the disposition goes back to the default, so a second signal ends the process). A SIGINT that
// was ignored when the scope began (a background job of a script) stays ignored. Scopes nest.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  static int received();  // the signal that asked the run to stop, or 0
  // The signal any rank of the job (dist::world()) received, or 0, the same on every rank: a
  // collective call, so that all ranks stop at the same point (mpirun passes a signal on to every
  // rank, each in its own time). A single process's received().
  static int received_anywhere();
};

// flock(2) on DIR/.lock, with this process's pid written in it; removed on release. Throws a
// one-line gmlp::Error naming the folder and the holder's pid when another process holds it,
// and one naming the folder when it cannot be written.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// Removes what interrupted writes (write_file_atomic's NAME.tmp.PID) left in `dir`, whose lock
// the caller holds; true when there was any.
bool remove_temporaries(const std::string& dir);

class RunDir {
 public:
  // Opens `dir` for `command` (train, pretrain or finetune: named in messages): creates it
  // (fresh, overwrite), takes its lock, removes stale temporaries, finishes an interrupted
  // commit; then fresh refuses a folder that holds a run (one line: the folder, its epochs,
  // --resume DIR or --overwrite), overwrite removes it, resume fails without one. Everything
  // but inspect installs StopSignals. Throws a one-line gmlp::Error.
  //
  // In a data-parallel job (dist::world() of several ranks) only rank 0 does all that and writes
  // the folder; the others open it after rank 0 has, take its epoch, and commit nothing.
  RunDir(std::string dir, std::string command, RunStart start);
  // Releases the lock; a folder this RunDir created and committed nothing to is removed.
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const;
  int epoch() const { return epoch_; }  // the last committed epoch (0: none)

  // Commits `epoch` (> epoch()) with exactly these files, written in this order, as above.
  void commit(int epoch, const std::vector<EpochFile>& files);

  // Throws Interrupted if SIGINT or SIGTERM has arrived at any rank (StopSignals::received_anywhere:
  // every rank of a job must call it at the same point); `epochs` is the run's planned total.
  void check_stop(int epochs) const;

 private:
  void open(RunStart start);
  void recover();
  void remove_run();
  void release() noexcept;

  std::string dir_, command_;
  std::string held_command_;        // the command of the run found in the folder
  std::vector<std::string> files_;  // the committed epoch's files
  int epoch_ = 0;
  bool created_ = false;
  bool writer_ = true;  // false on the ranks of a data-parallel job other than 0
  std::unique_ptr<FolderLock> lock_;
  std::unique_ptr<StopSignals> signals_;
};

}  // namespace gmlp
