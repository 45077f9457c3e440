// The tensor-core chain of a matrix product: each output of A B is the unit's
// chain of fused steps over k (hardware/mma.hpp), 16 products a step in
// ascending k, each step's rounded result the next one's addend. A GEMM kernel
// runs it tile by tile; the emulator runs it on 16 x 8 tiles through
// mma_m16n8k16, whose fast path decodes each tile once, on every core.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "../core/format.hpp"
#include "../hardware/mma.hpp"
#include "../host/parallel.hpp"

namespace bitexact::matmul {

// k positions one fused step takes (the m16n8k16 shape's k).
inline constexpr std::size_t k_step = 16;

// A [M, K] and B [K, N] (row-major) repacked as the tensor cores read them:
// A in 16 x 16 tiles, B in 16 x 8 tiles with element (k, n) at [n * 16 + k],
// both in k-step order. Tiles past the matrices' edges hold zeros, as a GPU's
// out-of-bounds loads (TMA) give them; a zero product never raises e_max above
// the unit's zero-term exponent, so the padding changes no bit.
template <format In>
struct packed_operands {
  std::size_t m = 0, n = 0, k = 0;
  std::size_t row_blocks = 0, column_blocks = 0, k_steps = 0;
  std::vector<value<In>> a;  // [row block][k step][16 * 16]
  std::vector<value<In>> b;  // [column block][k step][8 * 16]

  std::span<const value<In>, 256> a_tile(std::size_t row_block, std::size_t step) const {
    return std::span<const value<In>, 256>(a.data() + (row_block * k_steps + step) * 256, 256);
  }
  std::span<const value<In>, 128> b_tile(std::size_t column_block, std::size_t step) const {
    return std::span<const value<In>, 128>(b.data() + (column_block * k_steps + step) * 128, 128);
  }
};

// Precondition: a holds m * k values, b k * n (checked by the caller, who names them).
template <format In>
packed_operands<In> pack(std::span<const value<In>> a, std::span<const value<In>> b, std::size_t m, std::size_t n,
                         std::size_t k) {
  packed_operands<In> p;
  p.m = m, p.n = n, p.k = k;
  p.row_blocks = (m + 15) / 16, p.column_blocks = (n + 7) / 8, p.k_steps = (k + k_step - 1) / k_step;
  p.a.assign(p.row_blocks * p.k_steps * 256, value<In>{});
  p.b.assign(p.column_blocks * p.k_steps * 128, value<In>{});
  for (std::size_t row = 0; row < m; ++row)
    for (std::size_t col = 0; col < k; ++col)
      p.a[((row / 16) * p.k_steps + col / 16) * 256 + (row % 16) * 16 + col % 16] = a[row * k + col];
  for (std::size_t row = 0; row < k; ++row)
    for (std::size_t col = 0; col < n; ++col)
      p.b[((col / 8) * p.k_steps + row / 16) * 128 + (col % 8) * 16 + row % 16] = b[row * n + col];
  return p;
}

// The chain over k steps [first_step, end_step) of every output, each from +0,
// into partial [m * n] (row-major): one split's partial sums.
template <format Acc, format In>
void chain_products(const fused_sum_unit& unit, const packed_operands<In>& p, std::size_t first_step,
                    std::size_t end_step, std::span<value<Acc>> partial, unsigned threads = 0) {
  if (partial.size() != p.m * p.n) throw std::invalid_argument("chain_products: partial needs m * n values");
  for_each_index(p.row_blocks * p.column_blocks, threads, [&](std::size_t tile) {
    const std::size_t row_block = tile / p.column_blocks, column_block = tile % p.column_blocks;
    std::array<value<Acc>, 128> accumulator{};
    for (std::size_t step = first_step; step < end_step; ++step)
      mma_m16n8k16<Acc, In>(unit, p.a_tile(row_block, step), p.b_tile(column_block, step), accumulator, accumulator);
    for (std::size_t i = 0; i < 16; ++i)
      for (std::size_t j = 0; j < 8; ++j) {
        const std::size_t row = row_block * 16 + i, col = column_block * 8 + j;
        if (row < p.m && col < p.n) partial[row * p.n + col] = accumulator[i * 8 + j];
      }
  });
}

}  // namespace bitexact::matmul
