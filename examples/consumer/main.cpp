// Uses the installed kiln library: builds a tensor, computes, checks the answer.
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  kiln::Tensor a = kiln::arange(6, kiln::DType::F32).view({2, 3});
  kiln::Tensor b = (a * 2 + 1).sum();
  double got = b.item<double>();
  std::printf("kiln %s consumer: sum(2*a+1) = %g\n", kiln::version().c_str(), got);
  return got == 36.0 ? 0 : 1;
}
