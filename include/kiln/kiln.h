#pragma once
// The whole public C++ API of kiln.
#include "kiln/autograd/autograd.h"
#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/scalar.h"
#include "kiln/core/shape.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/interceptor.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/event.h"
#include "kiln/runtime/generator.h"
#include "kiln/runtime/guard.h"
#include "kiln/runtime/stream.h"
#include "kiln/runtime/threads.h"
#include "kiln/runtime/profiler.h"
#include "kiln/tensor/promotion.h"
#include "kiln/tensor/tensor.h"

namespace kiln {
std::string version();     // "0.1.0"
std::string build_type();  // "Release", "Debug", ...
}  // namespace kiln
