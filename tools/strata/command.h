// The `strata` command's subcommands register themselves here; main() dispatches.
// Each subcommand lives in its own cmd_<name>.cc and declares its flags with FlagParser.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::cli {

// Exit codes shared by every subcommand.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the work failed (corrupt file, training diverged)
constexpr int kExitUsage = 2;    // unknown command or flag, bad flag value

struct Command {
  std::string name;
  std::string summary;  // one line for `strata help`
  std::function<int(const std::vector<std::string>& args)> run;
};

std::vector<Command>& Registry();

struct Registrar {
  explicit Registrar(Command c) { Registry().push_back(std::move(c)); }
};

// Declarative flags: `--name value`, `--name=value`, `--bool-flag`. Anything else that
// starts with "--" is an error. `--help` prints the help and exits 0.
class FlagParser {
 public:
  FlagParser(std::string command, std::string usage, std::string description);
  void Bool(const std::string& name, bool* out, const std::string& help);
  void String(const std::string& name, std::string* out, const std::string& help);
  void Int(const std::string& name, int64_t* out, const std::string& help);
  void Double(const std::string& name, double* out, const std::string& help);

  // Parses `args`, fills `positional`. Returns -1 to go on, or an exit code to return now
  // (0 after --help, kExitUsage after a one-line error on stderr).
  int Parse(const std::vector<std::string>& args, std::vector<std::string>* positional = nullptr);
  std::string Help() const;

 private:
  enum class Kind { kBool, kString, kInt, kDouble };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
  };
  std::string command_, usage_, description_;
  std::vector<Flag> flags_;
};

// "strata <command>: <message>" on stderr; returns `code`.
int Fail(const std::string& command, const std::string& message, int code = kExitFailure);

}  // namespace strata::cli
