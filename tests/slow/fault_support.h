// Fault injection for the recovery tests: jobs started in the background with their output in a
// file, waited on for a line (a fault point's "paused" line), their workers found by MPI rank,
// signalled, and the checkpoints they leave read back record by record.
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../e2e/cli_support.h"
#include "strata/record/record_reader.h"

namespace strata::testing {

// A seeded RNG whose seed is printed, so a failure reproduces: STRATA_TEST_SEED=S reruns it.
inline uint64_t TestSeed(const char* test) {
  uint64_t seed = 0;
  if (const char* s = std::getenv("STRATA_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  else seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[ seed     ] %s: STRATA_TEST_SEED=%llu reproduces this run\n", test, static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A command run by /bin/sh in the background, stdout and stderr into `log`.
struct BackgroundJob {
  pid_t pid = -1;
  std::string log;
  int status = 0;
  bool ended = false;

  static BackgroundJob Start(const std::string& command, const std::string& log) {
    BackgroundJob job;
    job.log = log;
    job.pid = ::fork();
    if (job.pid == 0) {
      ::setpgid(0, 0);  // its own process group: the cleanup reaches every process it started
      const std::string cmd = command + " >" + log + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return job;
  }
  // Polls until the log holds `text` (true) or the job ends or `seconds` pass (false).
  bool WaitForText(const std::string& text, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Slurp(log).find(text) != std::string::npos) return true;
      if (Poll()) return Slurp(log).find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  bool Poll() {
    if (!ended && ::waitpid(pid, &status, WNOHANG) == pid) ended = true;
    return ended;
  }
  // Waits up to `seconds` for the job to end; false if it did not (then it is left running).
  bool Wait(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!Poll() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return ended;
  }
  int exit_code() const { return ended && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  std::string output() const { return Slurp(log); }
  // Ends whatever is left of the job (a test that failed halfway).
  void KillAll() {
    if (!Poll()) {
      ::kill(-pid, SIGCONT);
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ended = true;
    }
  }
};

// The number after `key` in `text` (e.g. the pid in a fault point's line), or -1.
inline long NumberAfter(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(text.c_str() + at + key.size(), nullptr, 10);
}

// The processes whose command line holds `marker`, by MPI rank (OMPI_COMM_WORLD_RANK in their
// environment); -1 where none was found.
inline std::vector<pid_t> WorkersByRank(const std::string& marker, int ranks) {
  std::vector<pid_t> pids(static_cast<size_t>(ranks), -1);
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmdline = Slurp("/proc/" + std::string(e->d_name) + "/cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    // Not the launcher, nor a shell around a worker.
    if (cmdline.find(marker) == std::string::npos || cmdline.rfind("/bin/sh ", 0) == 0 || cmdline.rfind("sh ", 0) == 0 ||
        cmdline.find("mpirun") != std::string::npos)
      continue;
    std::string env = Slurp("/proc/" + std::string(e->d_name) + "/environ");
    const std::string key = std::string(1, '\0') + "OMPI_COMM_WORLD_RANK=";
    env.insert(0, 1, '\0');
    const size_t at = env.find(key);
    if (at == std::string::npos) continue;
    const int rank = std::atoi(env.c_str() + at + key.size());
    if (rank >= 0 && rank < ranks) pids[static_cast<size_t>(rank)] = pid;
  }
  ::closedir(proc);
  return pids;
}

// A checkpoint read back whole: every record present with its CRCs right, and its header.
struct CheckpointRead {
  bool ok = false;
  std::string error, header, params, slots;
  int64_t global_step = -1;
};
inline CheckpointRead ReadWholeCheckpoint(const std::string& path) {
  CheckpointRead c;
  auto r = record::RecordReader::Open(path);
  if (!r.ok()) {
    c.error = r.status().ToString();
    return c;
  }
  std::string iterator;
  for (std::string* rec : {&c.header, &c.params, &c.slots, &iterator}) {
    Status s = (*r)->ReadRecord(rec);
    if (!s.ok()) {
      c.error = s.ToString();
      return c;
    }
  }
  c.global_step = NumberAfter(c.header, "\"global_step\":");
  c.ok = true;
  return c;
}

// Files in `dir` whose name starts with `prefix` (the atomic writer's "NAME.tmp-" leftovers).
inline std::vector<std::string> FilesStartingWith(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  return out;
}

// The uninterrupted run a killed-and-resumed run is compared with, made once per build of the
// strata binary: ctest runs each test in a process of its own, so the checkpoint is kept in
// `dir` under a name stamped with the binary's size and modification time. `command(backup_dir,
// out)` is the run. It writes under a name of its own and is renamed into place, so two tests
// that make it at once both work (one rename wins; both hold the same bits).
inline CheckpointRead ReferenceRun(const std::string& dir, const std::function<std::string(const std::string&, const std::string&)>& command) {
  struct stat st {};
  ::stat(STRATA_BINARY, &st);
  const std::string ref = dir + "/reference-" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
                          std::to_string(st.st_mtim.tv_nsec) + ".ckpt";
  CheckpointRead made = ReadWholeCheckpoint(ref);
  if (made.ok) return made;
  std::filesystem::create_directories(dir);
  const std::string mine = dir + "/reference-by-" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(mine, ec);
  auto r = RunCommand(command(mine, mine + ".ckpt"), true);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::filesystem::rename(mine + ".ckpt", ref, ec);
  std::filesystem::remove_all(mine, ec);
  return ReadWholeCheckpoint(ref);
}

// The environment of an mpirun in a test: the dataset cache shared by the tests, root allowed,
// and Open MPI's session directory of this test process.
inline std::string MpiEnv() {
  std::string cache = ::testing::TempDir() + "/strata-train-cache";
  std::filesystem::create_directories(cache);
  // A session directory per test process: two mpiruns started at the same moment (ctest -j)
  // race to create Open MPI's shared /tmp/ompi.HOST.UID ("mkdir ... File exists").
  const std::string session = ::testing::TempDir() + "/strata-ompi-" + std::to_string(::getpid());
  std::filesystem::create_directories(session);
  return "STRATA_CACHE_DIR=" + cache + " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_orte_tmpdir_base=" +
         session + " ";
}
// A checkpoint's parameters (its second record) as floats; empty when it cannot be read.
inline std::vector<float> Params(const std::string& path) {
  auto r = record::RecordReader::Open(path);
  EXPECT_TRUE(r.ok()) << path;
  std::string header, params;
  if (!r.ok()) return {};
  EXPECT_TRUE((*r)->ReadRecord(&header).ok());
  EXPECT_TRUE((*r)->ReadRecord(&params).ok());
  std::vector<float> v(params.size() / 4);
  std::memcpy(v.data(), params.data(), v.size() * 4);
  return v;
}

// The largest absolute difference between two checkpoints' parameters (same model);
// infinity when either cannot be read or they differ in size (the caller's bound fails).
inline double MaxWeightDifference(const std::string& path_a, const std::string& path_b) {
  auto a = Params(path_a), b = Params(path_b);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(a.empty());
  if (a.empty() || a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
  return max_diff;
}

// Whether two checkpoints hold the same parameters, bit for bit (false when either is unreadable).
inline bool SameBits(const std::string& path_a, const std::string& path_b) {
  const std::vector<float> a = Params(path_a), b = Params(path_b);
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// What a job ended mid-run leaves in `dir` (its --checkpoint-dir `dir`/backup, --out
// `dir`/model.ckpt): no half-written backup's temporary and no model saved. Returns the backup
// as read back, for the caller's checks of it.
inline CheckpointRead ExpectNothingHalfWritten(const std::string& dir) {
  EXPECT_TRUE(FilesStartingWith(dir + "/backup", "backup.ckpt.tmp-").empty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.ckpt"));
  return ReadWholeCheckpoint(dir + "/backup/backup.ckpt");
}

// Strata's line, at `at` in `out`, came before anything the launcher said (`launcher_said`).
inline void ExpectStrataSpokeFirst(const std::string& out, size_t at, std::initializer_list<const char*> launcher_said,
                                   const std::string& what) {
  for (const char* said : launcher_said) {
    const size_t m = out.find(said);
    EXPECT_TRUE(m == std::string::npos || m > at) << what << " before Strata did:\n" << out;
  }
}

// A directory of this test's own under `parent`, emptied.
inline std::string FreshDir(const std::string& parent, const std::string& name) {
  const std::string d = parent + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace strata::testing
