// SPDX-License-Identifier: Apache-2.0
// The tile layouts of the forward's warpgroup (wgmma) backend, attn/flash.hpp: the 128-byte swizzle
// and the staged Q tile's row order. The device kernels' bits are pinned by
// tests/gpu/attn/flash_gpu_test.cu (FlashGpu.ForwardBitIdenticalToTwin runs the wgmma forward on
// sm_90a); these pin the layouts the descriptors assume.
#include <gtest/gtest.h>

#include <set>

#include "tiebreak/attn/flash.hpp"

namespace {

using namespace tiebreak::attn;

// The hardware's 128-byte swizzle: byte address bits 4-6 xor bits 7-9, from a 1024-byte-aligned base.
int hw_swizzle(int linear) { return linear ^ (((linear >> 7) & 7) << 4); }

template <int R, int C>
void check_sw128() {
  std::set<int> seen;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C / 8; ++c) {
      const int off = sw128_offset<R>(r, c);
      // The canonical layout: block c / 8 of [R][64], row r at 128 bytes a row, then swizzled.
      EXPECT_EQ(off, hw_swizzle(((c >> 3) * R + r) * 128 + (c & 7) * 16)) << "R=" << R << " r=" << r << " c=" << c;
      EXPECT_TRUE(seen.insert(off).second) << "two chunks in one place";
      EXPECT_GE(off, 0);
      EXPECT_LT(off, R * C * 2);
      // A chunk's 16 bytes stay inside their row's 128.
      EXPECT_EQ(off / 128, (c >> 3) * R + r);
    }
  EXPECT_EQ(static_cast<int>(seen.size()), R * C / 8);
}

TEST(WgmmaLayout, Swizzle128IsTheHardwaresOnEveryTile) {
  check_sw128<64, 64>();
  check_sw128<64, 128>();
  check_sw128<128, 64>();
  check_sw128<128, 128>();
}

TEST(WgmmaLayout, AtSixtyFourColumnsItIsTheFragmentBackendsLayout) {
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(sw128_offset<128>(r, c), 2 * swz<64>(r, 8 * c)) << r << " " << c;
}

template <int MT>
void check_q_slots() {
  std::set<int> slots;
  for (int r = 0; r < 64 * MT; ++r) {
    const int s = wgmma_q_slot<MT>(r);
    EXPECT_GE(s, 0);
    EXPECT_LT(s, 64 * MT);
    EXPECT_TRUE(slots.insert(s).second) << "MT=" << MT << ": rows share slot " << s;
  }
  // wgmma m-tile mt reads slots [64 mt, 64 mt + 64) and gives warp w its rows 16 w .. 16 w + 15: they
  // must be the rows the tile algorithm gives warp w's local rows x of m-tile mt (fwd_row).
  for (int w = 0; w < 4; ++w)
    for (int g = 0; g < 8; ++g)
      for (int x = 0; x < 2 * MT; ++x) {
        const int row = fwd_row<MT>(0, w, g, x), mt = x >> 1, i = g + 8 * (x & 1);
        EXPECT_EQ(wgmma_q_slot<MT>(row), 64 * mt + 16 * w + i) << "MT=" << MT << " w=" << w << " x=" << x;
      }
}

TEST(WgmmaLayout, StagedQRowsFollowTheWarpsMTiles) {
  check_q_slots<1>();
  check_q_slots<2>();
  EXPECT_EQ(fwd_rows<false>, 64 * fwd_mtiles<false>);
}

}  // namespace
