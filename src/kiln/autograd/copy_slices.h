#pragma once
// In-place ops on views of tensors in the autograd graph (see copy_slices.cpp).
#include <memory>
#include <string>

#include "kiln/autograd/node.h"

namespace kiln::autograd {

// Errors for in-place ops on views that autograd cannot follow: a view of a leaf that
// requires grad (as PyTorch), or of a non-contiguous base.
void check_in_place_on_view(const Tensor& view, const std::string& op);

// After an in-place op recorded as node `fn` wrote into `view`: the view's base gets a
// CopySlices node (fed by base_edge, the base's history before the op) as its grad_fn and
// the view is re-linked to it. self_input: the input of fn that was the view's old value
// (-1 when the op only wrote the view, as out=).
void rebase_view_history(Tensor& view, const std::shared_ptr<Node>& fn, int64_t self_input,
                         const Edge& base_edge);

}  // namespace kiln::autograd
