// Loopback servers for the remote-data tests, started and stopped by the tests themselves:
// nginx (the HTTP reference), s3rver (an S3-compatible store, from npm) and
// remote/fake_object_server.py (fault injection and a GCS JSON-API stand-in).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/status.h"
#include "strata/record/record_reader.h"

namespace strata::testing {

namespace fs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/strata-remote-XXXXXX";
    path = ::mkdtemp(tmpl);
    ::chmod(path.c_str(), 0755);  // nginx workers may run as another user
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool WaitForFile(const std::string& path, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

inline bool WaitForPort(int port, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (PortOpen(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A port the kernel just handed out (bound to 0, then released) for servers that need one on
// the command line.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline bool OnPath(const std::string& exe) {
  if (exe.find('/') != std::string::npos) return ::access(exe.c_str(), X_OK) == 0;
  const char* p = std::getenv("PATH");
  std::string path = std::string(p ? p : "") + ":/usr/sbin:/sbin";
  std::stringstream ss(path);
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  return false;
}

// A child process in its own process group, stopped (SIGTERM, then SIGKILL) on destruction.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }

  // Runs argv[0] (searched on PATH and /usr/sbin) with output to `log`.
  bool Start(std::vector<std::string> argv, const std::string& log) {
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::string path = std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin") + ":/usr/sbin:/sbin";
      ::setenv("PATH", path.c_str(), 1);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    return true;
  }
  bool Running() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) != 0) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// nginx serving `root` on a loopback port, keep-alive on, every request logged as
// "<connection serial> <requests on that connection> <status> <bytes>" to access.log.
struct Nginx {
  TempDir dir;
  Child child;
  int port = 0;
  std::string error;  // why Start failed

  std::string access_log() const { return dir.path + "/access.log"; }

  // With `cert` and `key` (PEM files) the port speaks TLS (https://).
  bool Start(const std::string& root, const std::string& cert = "", const std::string& key = "") {
    if (!OnPath("nginx")) {
      error = "nginx is not installed (scripts/deps.sh installs nginx-light): the HTTP tests need it";
      return false;
    }
    fs::create_directories(dir.path + "/tmp");
    for (int attempt = 0; attempt < 5; ++attempt) {
      port = FreePort();
      std::ofstream conf(dir.path + "/nginx.conf");
      conf << "daemon off;\nworker_processes 1;\npid " << dir.path << "/nginx.pid;\nerror_log " << dir.path
           << "/error.log;\n"
           << "events { worker_connections 1024; }\n"
           << "http {\n  log_format conns '$connection $connection_requests $status $body_bytes_sent';\n"
           << "  access_log " << access_log() << " conns;\n"
           << "  client_body_temp_path " << dir.path << "/tmp;\n"
           << "  keepalive_timeout 60s;\n  keepalive_requests 100000;\n  sendfile on;\n"
           << "  default_type application/octet-stream;\n"
           << "  server {\n    listen 127.0.0.1:" << port << (cert.empty() ? "" : " ssl") << ";\n    root " << root
           << ";\n";
      if (!cert.empty()) conf << "    ssl_certificate " << cert << ";\n    ssl_certificate_key " << key << ";\n";
      conf << "  }\n}\n";
      conf.close();
      if (!child.Start({"nginx", "-e", dir.path + "/error.log", "-p", dir.path, "-c", dir.path + "/nginx.conf"},
                       dir.path + "/nginx.out")) {
        error = "cannot fork nginx";
        return false;
      }
      if (WaitForPort(port, 10)) return true;
      child.Stop();
    }
    error = "nginx did not start: " + ReadText(dir.path + "/nginx.out") + ReadText(dir.path + "/error.log");
    return false;
  }
};

// remote/fake_object_server.py with `flags`; the port it picked is in `port`.
struct FakeServer {
  TempDir dir;
  Child child;
  int port = 0;
  std::string error;

  bool Start(const std::string& root, std::vector<std::string> flags) {
    const std::string port_file = dir.path + "/port";
    std::vector<std::string> argv = {"python3", std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/fake_object_server.py",
                                     "--root", root, "--port-file", port_file};
    argv.insert(argv.end(), flags.begin(), flags.end());
    if (!child.Start(argv, dir.path + "/server.log") || !WaitForFile(port_file, 10)) {
      error = "fake_object_server.py did not start: " + ReadText(dir.path + "/server.log");
      return false;
    }
    port = std::atoi(ReadText(port_file).c_str());
    return WaitForPort(port, 10);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// A certificate authority and a server certificate it signed for 127.0.0.1 (subjectAltName
// IP), made with the openssl command in `dir`; `other_ca` is a second CA that signed nothing
// here, for the refusal. P-256 keys: fast to make.
struct TestCa {
  std::string ca, other_ca, server_cert, server_key;
  std::string error;

  bool Make(const std::string& dir) {
    if (!OnPath("openssl")) {
      error = "openssl is not installed: the https:// test makes its CA with it";
      return false;
    }
    ca = dir + "/ca.pem", other_ca = dir + "/other-ca.pem";
    server_cert = dir + "/server.pem", server_key = dir + "/server.key";
    std::ofstream(dir + "/san.cnf") << "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n";
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    const std::vector<std::string> steps = {
        "openssl req -x509 " + key + " -keyout " + dir + "/ca.key -out " + ca + " -days 2 -subj /CN=strata-test-ca",
        "openssl req -x509 " + key + " -keyout " + dir + "/other-ca.key -out " + other_ca +
            " -days 2 -subj /CN=strata-other-ca",
        "openssl req -new " + key + " -keyout " + server_key + " -out " + dir + "/server.csr -subj /CN=127.0.0.1",
        "openssl x509 -req -in " + dir + "/server.csr -CA " + ca + " -CAkey " + dir + "/ca.key -CAcreateserial -out " +
            server_cert + " -days 2 -extfile " + dir + "/san.cnf",
    };
    for (const auto& step : steps) {
      const std::string cmd = step + " > " + dir + "/openssl.log 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        error = "failed: " + step + ": " + ReadText(dir + "/openssl.log");
        return false;
      }
    }
    ::chmod(server_key.c_str(), 0644);  // nginx reads it as the user it runs as
    return true;
  }
};

// s3rver (npm, pinned by remote/s3rver/package-lock.json, installed into the build tree by
// remote/install_s3rver.sh) on a free loopback port with bucket `bucket`; objects under `dir`.
struct S3rver {
  TempDir dir;
  Child child;
  int port = 0;
  std::string error;

  bool Start(const std::string& bucket) {
    const std::string install_cmd = std::string(STRATA_SOURCE_DIR) + "/tests/e2e/remote/install_s3rver.sh " +
                                    std::string(STRATA_EXAMPLES_DIR) + "/../npm-test-servers 2>" + dir.path +
                                    "/npm.log";
    FILE* p = ::popen(install_cmd.c_str(), "r");
    std::string entry;
    if (p) {
      char buf[4096];
      while (fgets(buf, sizeof buf, p)) entry += buf;
      if (::pclose(p) != 0) entry.clear();
    }
    if (entry.empty()) {
      error = "npm ci of s3rver failed (needs node/npm and the npm registry): " + ReadText(dir.path + "/npm.log");
      return false;
    }
    entry = entry.substr(0, entry.find('\n'));
    if (!OnPath("node")) {
      error = "node is not installed: the s3:// tests run s3rver on it";
      return false;
    }
    port = FreePort();
    fs::create_directories(dir.path + "/data");
    // --openssl-legacy-provider: s3rver encrypts its ListObjectsV2 continuation tokens with DES,
    // which OpenSSL 3 only offers from its legacy provider; without it a listing of more than
    // 1,000 keys (the page size) fails with InternalError.
    if (!child.Start({"node", "--openssl-legacy-provider", entry, "-d", dir.path + "/data", "-a", "127.0.0.1", "-p", std::to_string(port), "-s",
                      "--configure-bucket", bucket},
                     dir.path + "/s3rver.log") ||
        !WaitForPort(port, 20)) {
      error = "s3rver did not start: " + ReadText(dir.path + "/s3rver.log");
      return false;
    }
    return true;
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port); }
};

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// The TensorFlow-written record files of testdata/real (the deliberately corrupt one left
// out, and folders such as keras/ that hold other formats), by name. STRATA_TESTDATA is
// the test targets' compile definition.
inline std::vector<std::string> RealRecordFiles() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(std::string(STRATA_TESTDATA) + "/real")) {
    if (!e.is_regular_file()) continue;
    const std::string n = e.path().filename().string();
    if (n.ends_with(".md") || n.starts_with("CORRUPT")) continue;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every record of a local path or URL, in order; the first error otherwise.
inline Result<std::vector<std::string>> ReadAll(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto r, record::RecordReader::Open(path));
  std::vector<std::string> out;
  std::string rec;
  Status s;
  while ((s = r->ReadRecord(&rec)).ok()) out.push_back(rec);
  if (!s.IsOutOfRange()) return s;
  return out;
}

}  // namespace strata::testing
