// gemm_kernel.h's AMX tile (this file is compiled with -mamx-tile -mamx-bf16): tdpbf16ps on
// 16 × 32 bf16 tiles of A and 16 × 16-pair tiles of B into 16 × 16 fp32 tiles of C. The panels are
// packed by gemm_avx512bf16.cpp (A) and the AVX512-BF16 packing (B), so this file holds only the
// tile instructions and the request for the tile state (their emulation: gemm_emulated.cpp).
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "core/cpu_features.h"
#include "core/gemm_kernel.h"

namespace gmlp::gemm {

namespace {

// The 64-byte operand of ldtilecfg: palette 1, and each tile's rows and bytes per row. Tiles 0–3
// accumulate C's four 16 × 16 quarters, 4–5 hold A's two 16-row halves, 6–7 B's two 16-column
// halves; every tile is 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
constexpr TileConfig eight_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.colsb[t] = 64, config.rows[t] = 16;
  return config;
}
// A constant, not a local: GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes of its
// operand, so the stores that fill a local's rows and columns were dropped as dead, and every
// tile instruction then faulted on unconfigured tiles.
constexpr TileConfig kEightTiles = eight_tiles();

}  // namespace

bool amx_permitted() {
  static const bool permitted = [] {
    if (!cpu_features().amx_bf16) return false;
    // Linux hands a process AMX's tile data only when asked (arch/x86/include/uapi/asm/prctl.h).
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return permitted;
}

void amx_configure() { _tile_loadconfig(&kEightTiles); }

void amx_release() { _tile_release(); }

void tile_amx(int64_t pairs, const uint32_t* a, int64_t lda, const uint32_t* b, float* c, int64_t ldc,
              bool accumulate) {
  const int64_t sa = lda * int64_t(sizeof(uint32_t)), sb = kNRBf16 * int64_t(sizeof(uint32_t));
  const int64_t sc = ldc * int64_t(sizeof(float));
  float* c1 = c + 16 * ldc;
  if (accumulate) {
    _tile_loadd(0, c, sc);
    _tile_loadd(1, c + 16, sc);
    _tile_loadd(2, c1, sc);
    _tile_loadd(3, c1 + 16, sc);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const uint32_t* a1 = a + 16 * lda;
  for (int64_t p = 0; p < pairs; p += kAmxPairs) {
    _tile_loadd(4, a + p, sa);
    _tile_loadd(6, b + p * kNRBf16, sb);
    _tile_loadd(7, b + p * kNRBf16 + 16, sb);
    _tile_loadd(5, a1 + p, sa);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, sc);
  _tile_stored(1, c + 16, sc);
  _tile_stored(2, c1, sc);
  _tile_stored(3, c1 + 16, sc);
}

}  // namespace gmlp::gemm
