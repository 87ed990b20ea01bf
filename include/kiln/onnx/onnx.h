#pragma once
// The ONNX importer (built when kiln is configured with KILN_WITH_ONNX).
#include "kiln/onnx/model.h"
#include "kiln/onnx/operators.h"
#include "kiln/onnx/tensor_proto.h"
