#include "command.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace strata::cli {

std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}

FlagParser::FlagParser(std::string command, std::string usage, std::string description)
    : command_(std::move(command)), usage_(std::move(usage)), description_(std::move(description)) {}

void FlagParser::Bool(const std::string& n, bool* o, const std::string& h) { flags_.push_back({n, Kind::kBool, o, h}); }
void FlagParser::String(const std::string& n, std::string* o, const std::string& h) { flags_.push_back({n, Kind::kString, o, h}); }
void FlagParser::Int(const std::string& n, int64_t* o, const std::string& h) { flags_.push_back({n, Kind::kInt, o, h}); }
void FlagParser::Double(const std::string& n, double* o, const std::string& h) { flags_.push_back({n, Kind::kDouble, o, h}); }

int FlagParser::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(Help().c_str(), stdout);
      return kExitOk;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      if (!positional) return Fail(command_, "unexpected argument '" + a + "' (see 'strata " + command_ + " --help')", kExitUsage);
      positional->push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* flag = nullptr;
    for (auto& f : flags_)
      if (f.name == name) flag = &f;
    if (!flag) return Fail(command_, "unknown flag --" + name + " (see 'strata " + command_ + " --help')", kExitUsage);
    if (flag->kind == Kind::kBool) {
      if (has_value && value != "true" && value != "false")
        return Fail(command_, "--" + name + " takes no value or true/false", kExitUsage);
      *static_cast<bool*>(flag->out) = !has_value || value == "true";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return Fail(command_, "--" + name + " needs a value", kExitUsage);
      value = args[++i];
    }
    char* end = nullptr;
    switch (flag->kind) {
      case Kind::kString: *static_cast<std::string*>(flag->out) = value; break;
      case Kind::kInt: {
        // errno: strtoll saturates at INT64_MIN/MAX on overflow; a value that does not fit
        // is an error, not the nearest int64 (fuzz/cli_flags_fuzz.cc checks it).
        errno = 0;
        long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end) return Fail(command_, "--" + name + " wants an integer, got '" + value + "'", kExitUsage);
        if (errno == ERANGE) return Fail(command_, "--" + name + " is beyond a 64-bit integer: '" + value + "'", kExitUsage);
        *static_cast<int64_t*>(flag->out) = v;
        break;
      }
      case Kind::kDouble: {
        double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end) return Fail(command_, "--" + name + " wants a number, got '" + value + "'", kExitUsage);
        // strtod also reads "inf", "nan" and 1e999 (as inf): no flag means any of them.
        if (!std::isfinite(v)) return Fail(command_, "--" + name + " wants a finite number, got '" + value + "'", kExitUsage);
        *static_cast<double*>(flag->out) = v;
        break;
      }
      case Kind::kBool: break;
    }
  }
  return -1;
}

std::string FlagParser::Help() const {
  std::string h = "usage: strata " + command_ + " " + usage_ + "\n\n" + description_ + "\n";
  if (!flags_.empty()) h += "\nflags:\n";
  for (const auto& f : flags_) {
    std::string left = "  --" + f.name + (f.kind == Kind::kBool ? "" : " VALUE");
    if (left.size() < 28) left.resize(28, ' ');
    else left += "  ";
    h += left + f.help + "\n";
  }
  return h;
}

int Fail(const std::string& command, const std::string& message, int code) {
  std::fprintf(stderr, "strata %s: %s\n", command.c_str(), message.c_str());
  return code;
}

}  // namespace strata::cli
