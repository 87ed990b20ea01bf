#pragma once
// The safetensors format: reading (SafetensorsFile) and writing (save_safetensors).
#include "kiln/io/safetensors_file.h"
#include "kiln/io/safetensors_writer.h"
