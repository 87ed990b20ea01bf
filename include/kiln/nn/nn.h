#pragma once
// The nn library: modules, layers, containers, initialisation, functional forms, losses
// and gradient clipping.
#include "kiln/nn/activation.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/clip_grad.h"
#include "kiln/nn/container.h"
#include "kiln/nn/conv.h"
#include "kiln/nn/embedding.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/functional_attention.h"
#include "kiln/nn/init.h"
#include "kiln/nn/linear.h"
#include "kiln/nn/module.h"
#include "kiln/nn/normalization.h"
#include "kiln/nn/ordered_dict.h"
#include "kiln/nn/pooling.h"
#include "kiln/nn/transformer.h"
