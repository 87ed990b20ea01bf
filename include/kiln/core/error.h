#pragma once
// Errors: every user-facing failure is a kiln::Error subclass whose message says what was
// expected and what was given. The Python bindings map each subclass to the exception type
// PyTorch raises for the same mistake (see the comment on each class).
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {  // Python: RuntimeError
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};
class ValueError : public Error {  // Python: ValueError (bad argument value)
 public:
  using Error::Error;
};
class TypeError : public Error {  // Python: TypeError (wrong dtype / argument type)
 public:
  using Error::Error;
};
class IndexError : public Error {  // Python: IndexError (index or dim out of range)
 public:
  using Error::Error;
};
class ShapeError : public Error {  // Python: RuntimeError (shapes do not match)
 public:
  using Error::Error;
};
class DeviceError : public Error {  // Python: RuntimeError (device mismatch, bad device)
 public:
  using Error::Error;
};
class NotImplementedError : public Error {  // Python: NotImplementedError
 public:
  using Error::Error;
};
class OutOfMemoryError : public Error {  // Python: kiln.OutOfMemoryError (a RuntimeError)
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_check_failure(const char* kind, const char* file, int line,
                                      const std::string& msg);
}  // namespace detail

}  // namespace kiln

// KILN_CHECK(cond, ErrorClass, message parts...) throws ErrorClass(message) when cond fails.
#define KILN_CHECK(cond, ErrClass, ...)                                   \
  do {                                                                    \
    if (__builtin_expect(!(cond), 0)) {                                   \
      throw ErrClass(::kiln::detail::str_cat(__VA_ARGS__));               \
    }                                                                     \
  } while (0)

// KILN_THROW(ErrorClass, message parts...) throws unconditionally.
#define KILN_THROW(ErrClass, ...) throw ErrClass(::kiln::detail::str_cat(__VA_ARGS__))

// KILN_INTERNAL_ASSERT is for invariants of kiln itself (a bug in kiln, not bad input).
#define KILN_INTERNAL_ASSERT(cond, ...)                                                   \
  do {                                                                                    \
    if (__builtin_expect(!(cond), 0)) {                                                   \
      ::kiln::detail::throw_check_failure("internal assert " #cond, __FILE__, __LINE__,   \
                                          ::kiln::detail::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                     \
  } while (0)
