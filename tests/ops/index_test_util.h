#pragma once
// Helpers for the indexing, shape and sorting op tests: host-side coordinates, small tensor
// builders, values every dtype holds exactly, and error checks that also work on the
// asynchronous testing device (errors thrown by kernels surface at the next host read).
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/test_util.h"

namespace kiln::test {

inline std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = i % s[d];
    i /= s[d];
  }
  return c;
}
inline int64_t ravel(const std::vector<int64_t>& c, const Shape& s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) i = i * s[d] + c[d];
  return i;
}

inline Tensor ints(const std::vector<int64_t>& v, const Shape& s, Device dev,
                   DType t = DType::I64) {
  return tensor_from(v, s, TensorOptions(t, dev));
}
inline Tensor ints(const std::vector<int64_t>& v, Device dev, DType t = DType::I64) {
  return ints(v, Shape{int64_t(v.size())}, dev, t);
}
inline Tensor bools(const std::vector<bool>& v, const Shape& s, Device dev) {
  return tensor_from(v, s, TensorOptions(DType::Bool, dev));
}

// n values that dtype t stores exactly: 0/1 for bool, small integers for integer types,
// values with a fractional part (already rounded to t) for floats.
inline std::vector<double> exact_values(size_t n, DType t, uint32_t seed) {
  if (t == DType::Bool) return random_values(n, 0, 2, seed, true);
  if (t == DType::U8) return random_values(n, 0, 50, seed, true);
  if (!is_floating(t)) return random_values(n, -50, 50, seed, true);
  return rounded(random_values(n, -20, 20, seed), t);
}

inline void expect_values(const Tensor& t, const Shape& s, const std::vector<double>& e,
                          const std::string& what = "") {
  expect_close(t, s, e, Tol{0, 0}, what);
}
inline void expect_ints(const Tensor& t, const Shape& s, const std::vector<int64_t>& e,
                        const std::string& what = "") {
  ASSERT_EQ(t.dtype(), DType::I64) << what;
  ASSERT_EQ(t.shape(), s) << what;
  EXPECT_EQ(t.to_vector<int64_t>(), e) << what;
}

// Runs f (which should read its result on the host so that asynchronous errors surface)
// and expects an exception of class E whose message contains every part.
template <typename E>
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts,
                  const std::string& what = "") {
  try {
    f();
  } catch (const E& e) {
    expect_python_class_of<E>(e);
    std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos)
          << what << ": message \"" << msg << "\" lacks \"" << p << "\"";
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong exception type, message: " << e.what();
    return;
  }
  ADD_FAILURE() << what << ": no exception thrown";
}

}  // namespace kiln::test
