#pragma once
// Shapes and strides (in elements), and the small helpers every layer uses on them.
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);  // checks for overflow and negative sizes
Strides contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"
std::ostream& operator<<(std::ostream& os, const Shape& s);

// wrap_dim(-1, 3) == 2. Throws IndexError naming the accepted range otherwise.
// A 0-d tensor accepts dims -1 and 0, as PyTorch.
int64_t wrap_dim(int64_t dim, int64_t ndim);

// The broadcast of two shapes (NumPy rules); ShapeError naming both shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace kiln
