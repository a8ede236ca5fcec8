// Errors as values at module borders.
//
// Anything that reads user input (model files, prompts, meshes, paths) returns
// a Result<T>: either the value or an Error that says what failed, on which
// file/tensor/value, and what to do about it. Broken internal invariants are
// not Errors; they abort through CUBEFORGE_CHECK.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace cubeforge {

enum class ErrorCode {
  kInvalidArgument,  // a value the caller passed is out of range or malformed
  kNotFound,         // a file, tensor or device is missing
  kCorruptFile,      // a file exists but its contents are invalid
  kUnsupported,      // valid input that this build cannot handle
  kIo,               // the operating system refused a read or write
  kOutOfMemory,
  kCancelled,        // the user asked to stop; a status, not a failure
  kInternal,
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  // The engine option at fault, by its key (inference/options/engine_options.h),
  // or empty: the front end words it as its flag or its control.
  std::string option;

  // "corrupt file: <message>", with untrusted text escaped for printing.
  std::string to_string() const;
};

inline Error make_error(ErrorCode code, std::string message) {
  return Error{code, std::move(message), {}};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(state_); }
  Error&& take_error() { return std::get<1>(std::move(state_)); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }
  Error&& take_error() { return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

[[noreturn]] void check_failed(const char* expression, const char* file, int line, const char* hint);

}  // namespace cubeforge

// Propagate an error from an expression returning Result/Status.
#define CUBEFORGE_TRY(expr)                                   \
  do {                                                        \
    auto cubeforge_try_result_ = (expr);                      \
    if (!cubeforge_try_result_.ok()) return cubeforge_try_result_.take_error(); \
  } while (0)

#define CUBEFORGE_CONCAT_INNER_(a, b) a##b
#define CUBEFORGE_CONCAT_(a, b) CUBEFORGE_CONCAT_INNER_(a, b)
// Bind the value of a Result to `lhs`, or return its error.
#define CUBEFORGE_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto CUBEFORGE_CONCAT_(cubeforge_result_, __LINE__) = (expr);                \
  if (!CUBEFORGE_CONCAT_(cubeforge_result_, __LINE__).ok())                    \
    return CUBEFORGE_CONCAT_(cubeforge_result_, __LINE__).take_error();        \
  lhs = std::move(CUBEFORGE_CONCAT_(cubeforge_result_, __LINE__)).value()

// Invariants that only a bug can break. Aborts with the statement and location.
#define CUBEFORGE_CHECK(cond, hint)                                            \
  do {                                                                         \
    if (!(cond)) ::cubeforge::check_failed(#cond, __FILE__, __LINE__, hint);   \
  } while (0)
