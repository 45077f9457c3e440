// The GEMM emulator's chain (matmul/chain.hpp) against the tensor-core model
// it is built from: every output of A B equals fused_dot's chain of fused
// steps over K (zero-padded to whole steps), for shapes that are not whole
// tiles, on any number of threads.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include <bitexact/matmul/gemm.hpp>

using namespace bitexact;

namespace {

std::vector<bfloat16> random_matrix(std::size_t size, unsigned seed, int exponent_spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<bfloat16> x(size);
  for (bfloat16& v : x)
    v = convert<bf16>(from_host(std::ldexp(normal(rng), static_cast<int>(rng() % (2 * exponent_spread + 1)) - exponent_spread)))
            .result;
  return x;
}

// D[i][j] by fused_dot on row i of A and column j of B, both zero-padded to whole k steps.
float32 reference(const std::vector<bfloat16>& a, const std::vector<bfloat16>& b, std::size_t n, std::size_t k,
                  std::size_t i, std::size_t j) {
  const std::size_t padded = (k + 15) / 16 * 16;
  std::vector<bfloat16> row(padded), column(padded);
  for (std::size_t x = 0; x < k; ++x) row[x] = a[i * k + x], column[x] = b[x * n + j];
  return fused_dot<fp32>(sm90_tensor_core, std::span<const bfloat16>(row), std::span<const bfloat16>(column), float32{})
      .result;
}

}  // namespace

TEST_CASE("matmul chain: every output is fused_dot's chain over K, on shapes that are not whole tiles") {
  std::size_t compared = 0;
  for (const auto& [m, n, k] : {std::array<std::size_t, 3>{37, 23, 100}, {16, 8, 16}, {1, 1, 1}, {5, 70, 333}}) {
    const std::vector<bfloat16> a = random_matrix(m * k, 1, 12), b = random_matrix(k * n, 2, 12);
    const matmul::packed_operands<bf16> p = matmul::pack<bf16>(a, b, m, n, k);
    std::vector<float32> d(m * n);
    matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, d);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j, ++compared) CHECK(d[i * n + j].bits == reference(a, b, n, k, i, j).bits);
  }
  MESSAGE(compared << " outputs compared with fused_dot");
  CHECK(compared == 37 * 23 + 16 * 8 + 1 + 5 * 70);
}

TEST_CASE("matmul chain: one thread and every core give the same bits") {
  const std::size_t m = 100, n = 90, k = 260;
  const std::vector<bfloat16> a = random_matrix(m * k, 3, 30), b = random_matrix(k * n, 4, 30);
  const matmul::packed_operands<bf16> p = matmul::pack<bf16>(a, b, m, n, k);
  std::vector<float32> one(m * n), all(m * n), three(m * n);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, one, 1);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, all, 0);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, three, 3);
  int differ = 0;
  for (std::size_t i = 0; i < m * n; ++i) differ += one[i].bits != all[i].bits || one[i].bits != three[i].bits;
  CHECK(differ == 0);
}

TEST_CASE("matmul split_steps: the splits take every k step once, in order, each a whole number of K tiles") {
  int checked = 0;
  for (const int splits : {1, 2, 3, 5, 12, 25})
    for (const std::size_t k_tile : {std::size_t{16}, std::size_t{64}, std::size_t{128}})
      for (const std::size_t k : {std::size_t{1}, std::size_t{100}, std::size_t{3000}, std::size_t{32768}}) {
        const matmul::gemm_kernel kernel{sm90_tensor_core, splits, k_tile};
        std::size_t next = 0;
        for (int s = 0; s < splits; ++s) {
          const auto [first, end] = matmul::split_steps(kernel, k, s);
          CHECK(first <= end);
          if (first == end) continue;
          CHECK(first == next);
          if (s + 1 < splits && end < (k + 15) / 16) CHECK((end * 16) % k_tile == 0);
          next = end;
        }
        CHECK(next == (k + 15) / 16);
        ++checked;
      }
  CHECK(checked == 6 * 3 * 4);
  // 96 x 200 x 3000 in 2 splits: chunk ceil(3000 / 2) = 1500, rounded up to 1536 (24 K tiles).
  CHECK(matmul::split_steps({sm90_tensor_core, 2, 64}, 3000, 0) == std::pair<std::size_t, std::size_t>{0, 96});
  CHECK(matmul::split_steps({sm90_tensor_core, 2, 64}, 3000, 1) == std::pair<std::size_t, std::size_t>{96, 188});
}
