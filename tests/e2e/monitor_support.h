// Runs `strata` in the background for the monitor's end-to-end tests: the test is the parent
// (posix_spawn), so it can read the child's stderr as it grows, stop it and reap it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace strata::testing {

class Background {
 public:
  // argv[0] is the program; stdout and stderr go to `out_path` / `err_path`.
  Background(const std::vector<std::string>& argv, std::string out_path, std::string err_path)
      : out_(std::move(out_path)), err_(std::move(err_path)) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Background() { Stop(); }

  bool started() const { return pid_ > 0; }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string Out() const { return Slurp(out_); }
  std::string Err() const { return Slurp(err_); }

  // Waits until stderr contains `needle` (true) or `seconds` pass / the child exits (false).
  bool WaitForErr(const std::string& needle, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Err().find(needle) != std::string::npos) return true;
      if (Exited()) return Err().find(needle) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits for the child to exit by itself; returns its exit code (-1: still running, killed).
  int Wait(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Exited()) return code_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Stop();
    return -1;
  }

  void Stop() {
    if (pid_ > 0 && !Exited()) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      done_ = true;
    }
  }

 private:
  bool Exited() {
    if (done_ || pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      done_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    return done_;
  }

  std::string out_, err_;
  pid_t pid_ = -1;
  bool done_ = false;
  int code_ = -1;
};

}  // namespace strata::testing
