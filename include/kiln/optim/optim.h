#pragma once
// The optim library: optimizers and learning-rate schedulers.
#include "kiln/optim/adagrad.h"
#include "kiln/optim/adam.h"
#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/rmsprop.h"
#include "kiln/optim/sgd.h"
