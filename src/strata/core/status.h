// Status and Result<T>: errors as values at every library boundary.
//
// An OK Status is one null pointer (cheap to create, copy and test); an error carries a
// code and a message that names its context (file, byte offset, feature, layer, shape).
// Exceptions never cross the public API: code that calls something that throws converts
// at that one place with STRATA_CATCH_TO_STATUS or an explicit try/catch.
#pragma once
#pragma GCC visibility push(default)  // installed: libstrata.so exports what it declares

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace strata {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something wrong (a shape, a flag, a spec)
  kNotFound,         // a file, key or feature that should exist does not
  kCorruption,       // bytes on disk are not what the format says (bad CRC, bad varint)
  kTruncated,        // a file ends inside a record (a writer may still be appending)
  kOutOfRange,       // clean end of a stream, or an index past the end
  kIOError,          // the operating system refused (open, read, write, fsync, rename)
  kUnimplemented,    // a valid request this build does not support
  kInternal,         // a bug in Strata or an error from a library it calls
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "Corruption: bad data CRC in train.tfrecord at byte 1234".
  std::string ToString() const;

  // Prefixes context to the message of an error ("reading shard 3: " + message).
  Status WithContext(std::string_view context) const;

  bool IsOutOfRange() const { return code() == StatusCode::kOutOfRange; }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status Truncated(std::string m) { return {StatusCode::kTruncated, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
// An IOError that appends strerror(errno_value) and names the path.
Status ErrnoError(std::string_view what, std::string_view path, int errno_value);

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {           // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace strata

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define STRATA_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::strata::Status _st = (expr);                   \
    if (!_st.ok()) return _st;                       \
  } while (0)

// `STRATA_ASSIGN_OR_RETURN(auto x, MakeX());`
#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL(STRATA_CONCAT(_res_, __LINE__), lhs, expr)
#define STRATA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#pragma GCC visibility pop
