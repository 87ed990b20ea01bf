#pragma once
// AMX tile instructions for the tile GEMM kernels (gemm_amx_body.inc), behind a small class so
// that the same kernel code also runs against a software model of the tiles
// (tests/amx/amx_tile_model.h) on CPUs without AMX.
//
// Written as inline assembly, not GCC 12's intrinsics: `_tile_loadd` and friends paste the
// tile number into the instruction text (so it cannot be a template argument), declare no
// memory operands (so the compiler may move stores to the source past a tile load), and
// `_tile_loadconfig` declares only 8 of the 64 configuration bytes as read (HARDWARE.md: at
// -O2 the stores to rows[] / colsb[] were removed and the first tileloadd raised SIGILL). Each
// statement here names its tiles as immediates and clobbers memory. The assembler accepts the
// mnemonics without -mamx-* flags; they execute only after cpu_info.cpp detected AMX and was
// granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM).
#include <cstdint>

namespace kiln::cpu {

// The 64-byte operand of ldtilecfg (palette 1): per tile, rows and bytes per row.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64);

// Tiles 0-7 all 16 rows of 64 bytes: what every kernel in gemm_amx_body.inc uses.
inline AmxTileConfig amx_full_tiles() {
  AmxTileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  return c;
}

// The hardware. Each thread that runs tile instructions loads a configuration first and
// releases the tile state when done.
struct AmxHardwareTiles {
  static void configure(const AmxTileConfig& c) { asm volatile("ldtilecfg %0" ::"m"(c)); }
  static void release() { asm volatile("tilerelease" ::: "memory"); }
  template <int T>
  static void zero() {
    asm volatile("tilezero %%tmm%c0" ::"i"(T));
  }
  // Rows r of tile T <- the 64 bytes at p + r * stride (bytes).
  template <int T>
  static void load(const void* p, int64_t stride) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  // The same with the non-temporal hint (tileloaddt1): for operands streamed once through L1,
  // so that they do not evict the tiles that stay there (decision 0116).
  template <int T>
  static void load_stream(const void* p, int64_t stride) {
    asm volatile("tileloaddt1 (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  // Tile C (float32) += tile A (rows of bfloat16 pairs) x tile B (rows of pairs, one per column).
  template <int C, int A, int B>
  static void dot_bf16() {
    asm volatile("tdpbf16ps %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(B), "i"(A), "i"(C));
  }
  // Tile C (int32) += tile A (rows of int8 quadruples) x tile B (quadruples per column),
  // A signed (tdpbssd) or unsigned (tdpbusd), B signed.
  template <int C, int A, int B>
  static void dot_s8s8() {
    asm volatile("tdpbssd %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(B), "i"(A), "i"(C));
  }
  template <int C, int A, int B>
  static void dot_u8s8() {
    asm volatile("tdpbusd %%tmm%c0, %%tmm%c1, %%tmm%c2" ::"i"(B), "i"(A), "i"(C));
  }
};

}  // namespace kiln::cpu
