#include "kiln/core/scalar.h"

#include <ostream>

namespace kiln {
std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.to_bool() ? "True" : "False");
    case Scalar::Kind::Int: return os << s.to_int();
    case Scalar::Kind::Float: return os << s.to_double();
    case Scalar::Kind::Complex:
      return os << "(" << s.real() << (s.imag() < 0 ? "-" : "+") << (s.imag() < 0 ? -s.imag() : s.imag())
                << "j)";
  }
  return os;
}

void Scalar::check_real() const {
  KILN_CHECK(im_ == 0.0, TypeError, "value ", *this,
             " cannot be converted to a real type without losing its imaginary part");
}
}  // namespace kiln
