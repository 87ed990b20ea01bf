#pragma once
// einsum: numpy / PyTorch's Einstein summation over any number of operands ("ij,jk->ik",
// "...ij->...ji", implicit outputs, repeated labels for diagonals), composed from views, sums
// and one batched matrix product per pair of operands, so autograd differentiates it.
#include <string>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

// Letters a-z and A-Z are labels, "..." stands for the dims no letter names (broadcast as
// numpy's); spaces are ignored. Without "->", the output is the ellipsis then the labels used
// once, alphabetically. ValueError for a malformed equation, ShapeError for operands whose
// sizes disagree with it.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln
