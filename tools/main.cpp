// gmlp: train, compare, evaluate, run and measure gMLP and the models it is compared with.
// Exit status: 0 success, 1 failure (one line on stderr), 2 usage error, 130 or 143 a run stopped
// by SIGINT or SIGTERM (the line says what is saved and how to go on).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>

#include "commands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "train/run_dir.h"
#ifdef GMLP_WITH_MPI
#include "dist/mpi.h"
#endif

namespace {

// A word of a command line as a POSIX shell reads it back.
std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-") ==
                        std::string::npos)
    return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A run stopped by SIGINT or SIGTERM: one line saying what is saved and the command that goes
// on from there; the exit status is 128 + the signal, as a shell reports a process it ended.
int report_stop(const gmlp::Interrupted& stop, int argc, char** argv) {
  const char* sig = stop.signal == SIGTERM ? "SIGTERM" : "SIGINT";
  std::string again = shell_word(argv[0]);
  if (stop.command == "compare" || stop.epoch == 0) {  // the same command, less --overwrite
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) != "--overwrite") again += " " + shell_word(argv[i]);
  } else {
    again += " " + stop.command + " --resume " + shell_word(stop.dir) + " --epochs " + std::to_string(stop.epochs);
  }
  if (isatty(fileno(stderr))) std::fputc('\n', stderr);  // past the progress line and ^C
  if (stop.command == "compare")
    std::fprintf(stderr, "gmlp: stopped by %s: '%s' keeps every finished run and epoch; continue with: %s\n", sig,
                 stop.dir.c_str(), again.c_str());
  else if (stop.epoch == 0)
    std::fprintf(stderr, "gmlp: stopped by %s before the first epoch ended, nothing saved; start again with: %s\n", sig,
                 again.c_str());
  else
    std::fprintf(stderr, "gmlp: stopped by %s: epoch %d of %d is saved in '%s'; continue with: %s\n", sig, stop.epoch,
                 stop.epochs, stop.dir.c_str(), again.c_str());
  return 128 + stop.signal;
}

// The job this process is part of. Started by mpirun, every rank runs the command and rank 0
// alone speaks: the others' stdout and stderr go to /dev/null, stderr coming back for an error,
// which names the rank and ends the whole job (MPI_Abort), so that no rank waits for a dead one.
class Job {
 public:
  Job(int* argc, char*** argv) {
    launched_ = gmlp::dist::launched_ranks();
#ifdef GMLP_WITH_MPI
    if (launched_ > 0) gmlp::dist::set_world(gmlp::dist::mpi_world(argc, argv));
#endif
    const gmlp::dist::Communicator& w = gmlp::dist::world();
    if (w.size() > 1 && w.rank() != 0) {
      std::fflush(stdout), std::fflush(stderr);
      stderr_ = dup(STDERR_FILENO);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDOUT_FILENO), dup2(null, STDERR_FILENO);
      close(null);
    }
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // A job of several processes that cannot be one: mpirun started this gmlp, built without MPI.
  void check() const {
    if (launched_ > 1 && gmlp::dist::world().size() == 1)
      gmlp::fail("started as one of ", launched_,
                 " ranks by an MPI launcher, but this gmlp was built without MPI (scripts/setup.sh installs Open "
                 "MPI; then rebuild)");
  }
  // What an error line starts with: "rank 1 of 2: " in a job of several; stderr comes back.
  std::string speak() const {
    const gmlp::dist::Communicator& w = gmlp::dist::world();
    if (stderr_ >= 0) dup2(stderr_, STDERR_FILENO);
    return w.size() > 1 ? "rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) + ": " : "";
  }
  // The exit status: a failure ends every rank; otherwise MPI is finalised.
  int end(int status) {
    gmlp::dist::Communicator& w = gmlp::dist::world();
    std::fflush(stdout), std::fflush(stderr);
    if (w.size() > 1 && status != 0 && status < 128) w.abort(status);
    gmlp::dist::set_world(std::make_unique<gmlp::dist::SingleProcess>());
    return status;
  }

 private:
  int launched_ = 0;
  int stderr_ = -1;
};

int run(int argc, char** argv, const Job& job);

}  // namespace

int main(int argc, char** argv) {
  try {
    Job job(&argc, &argv);
    return job.end(run(argc, argv, job));
  } catch (const gmlp::Error& e) {  // MPI failed to start
    std::fprintf(stderr, "gmlp: error: %s\n", e.what());
    return 1;
  }
}

namespace {

int run(int argc, char** argv, const Job& job) {
  CLI::App app{
      "gmlp: gMLP and aMLP (\"Pay Attention to MLPs\") and the models they are compared with, for images and text, in "
      "C++ on the CPU"};
  app.require_subcommand(1);
  // Version, commit, compiler, build, CPU features, MPI: what a bug report needs, in four lines.
  app.set_version_flag(
      "--version",
      [] {
#ifdef GMLP_WITH_MPI
        return gmlp::version_report() + "\ndata-parallel: mpirun -np N, on MPI (" + gmlp::dist::mpi_library() + ")";
#else
        return gmlp::version_report() + "\ndata-parallel: none (built without MPI)";
#endif
      },
      "Print the version, the build and this CPU's features, then exit");
  gmlp::cli::add_commands(app);
  app.name(argv[0]);
  try {
    job.check();
    std::vector<std::string> args = gmlp::cli::expand_config(app, {argv + 1, argv + argc});
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const gmlp::cli::Reported&) {
    return 1;
  } catch (const gmlp::Interrupted& stop) {
    return report_stop(stop, argc, argv);
  } catch (const gmlp::Error& e) {
    std::fprintf(stderr, "gmlp: error: %s%s\n", job.speak().c_str(), e.what());
    return 1;
  } catch (const gmlp::InternalError& e) {
    std::fprintf(stderr, "gmlp: internal error: %s%s (a bug in gmlp: please report it with the command line)\n",
                 job.speak().c_str(), e.what());
    return 70;  // EX_SOFTWARE
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gmlp: error: %sout of memory\n", job.speak().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gmlp: error: %s%s\n", job.speak().c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace
