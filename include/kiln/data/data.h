#pragma once
// The data layer: datasets, the DataLoader and the IDX (MNIST) reader.
#include "kiln/data/dataloader.h"
#include "kiln/data/dataset.h"
#include "kiln/data/idx.h"
#include "kiln/data/mnist.h"
