// `bitexact attention --compare A B`: two GPU kernels on the same files,
// how their O and L differ, and where the rows of the first differing
// element part.
#include "attention.hpp"

namespace bitexact::cli::attention_parts {

// How a kernel took one key's P into P V: in which block, against which
// maximum, and the roundings to fp32 (the exponential) and to P-bar: bf16,
// or an fp8 kernel's e4m3(RN(P * scale_s)).
struct key_outcome {
  int block = -1, visit = 0;  // visit: the block's place in the kernel's order, from 1
  int max_key = -1;           // the key whose score was the running max the P was taken against
  float32 max{}, p{};         // that max in the kernel's units; P in fp32
  bfloat16 p_bf16{};
  std::optional<float8_e4m3> p_e4m3;  // an fp8 kernel's P-bar (p_bf16 unused)
  bool same_p_bar(const key_outcome& other) const {
    return p_e4m3 ? other.p_e4m3 && p_e4m3->bits == other.p_e4m3->bits : p_bf16.bits == other.p_bf16.bits;
  }
};

// One row of one head through a kernel, for --compare: its row sum, its
// element's unnormalised O after the last block, O in fp32 and L, and each
// key's P.
struct row_outcome {
  float32 sum{}, unnormalised{}, normalised{}, lse{};
  std::string blocks;  // the K/V blocks in the order the kernel visited them
  std::vector<key_outcome> keys;
};

struct row_recorder {
  int row = 0;
  std::size_t col = 0;
  row_outcome* out = nullptr;
  int visits = 0, max_key = -1;
  float max_score = -INFINITY;  // the largest score seen so far, in the kernel's units (a monotone map of the raw)
  void on(const attention::softmax_block_event& e) {
    if (e.row != row) return;
    ++visits;
    const std::size_t first = static_cast<std::size_t>(e.block) * e.scores.size();
    for (std::size_t j = 0; j < e.scores.size(); ++j)
      if (to_host(e.scores[j]) > max_score) max_score = to_host(e.scores[j]), max_key = static_cast<int>(first + j);
    for (std::size_t j = 0; j < e.scores.size() && first + j < out->keys.size(); ++j) {
      key_outcome& key = out->keys[first + j];
      key = {e.block, visits, max_key, e.running_max, e.p[j], {}, std::nullopt};
      if (e.p_e4m3.empty()) key.p_bf16 = e.p_bf16[j];
      else key.p_e4m3 = e.p_e4m3[j];
    }
  }
  void on(const attention::output_block_event& e) {
    if (e.row != row) return;
    out->unnormalised = e.o[col];
    out->blocks += (out->blocks.empty() ? "" : " ") + std::to_string(e.block);
  }
  void on(const attention::row_end_event& e) {
    if (e.row != row) return;
    out->sum = e.sum;
    out->normalised = e.o[col];
    out->lse = e.lse;
  }
};

row_outcome trace_row(const attention_problem& p, std::size_t head, std::size_t row, std::size_t col) {
  const std::size_t rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  std::vector<bfloat16> o(rows * d);
  std::vector<float32> lse(rows);
  row_outcome out;
  out.keys.resize(keys);
  with_head(p, head, [&](auto q, auto k, auto v) {
    attention::flash_forward_head(p.kernel(), p.call.head, q, k, v, std::span<bfloat16>(o), std::span<float32>(lse),
                                  row_recorder{static_cast<int>(row), col, &out});
  });
  return out;
}

// The first key, in key order, whose P enters P V as another bf16 number in
// the two kernels, side by side: the block that held it and when the kernel
// visited it, the running max it was taken against (the key whose score that
// is, and the max in each kernel's own units), P in fp32 and its rounding.
void print_first_key_apart(const row_outcome& a, const row_outcome& b, float32 p_scale_a, float32 p_scale_b) {
  const bool fp8 = !a.keys.empty() && a.keys.front().p_e4m3;
  const char* p_bar = fp8 ? "e4m3 P-bar" : "bf16 P";
  std::size_t key = 0;
  while (key < a.keys.size() && (a.keys[key].block < 0 || a.keys[key].same_p_bar(b.keys[key]))) ++key;
  if (key == a.keys.size()) {
    std::printf("  every key's P enters P V as the same %s in both kernels\n", fp8 ? "e4m3 P-bar" : "bf16 number");
    return;
  }
  const key_outcome &x = a.keys[key], &y = b.keys[key];
  std::printf("  first key whose %s differs: key %zu\n", p_bar, key);
  const auto side = [](const char* name, const key_outcome& k, float32 p_scale) {
    // P-bar against what it rounds: P (bf16), or RN(P * scale_s) (e4m3).
    const float32 before = k.p_e4m3 ? ptx::mul_f32(k.p, p_scale) : k.p;
    const double error = (k.p_e4m3 ? to_double(*k.p_e4m3) : to_double(k.p_bf16)) - to_double(before);
    std::printf("    %s block %d, visited %d%s; max of the keys seen so far: key %d's score, %s in its units\n"
                "      P %s -> %s %s (%s)\n",
                name, k.block, k.visit, k.visit == 1 ? "st" : k.visit == 2 ? "nd" : k.visit == 3 ? "rd" : "th", k.max_key,
                value_text(k.max).c_str(), value_text(k.p).c_str(),
                k.p_e4m3 ? fmt::format("times scale_s {}, e4m3", to_host(p_scale)).c_str() : "bf16",
                k.p_e4m3 ? value_text(*k.p_e4m3).c_str() : value_text(k.p_bf16).c_str(),
                std::isnan(error) ? "NaN" : error == 0 ? "exact" : error > 0 ? "rounded up" : "rounded down");
  };
  side("A", x, p_scale_a);
  side("B", y, p_scale_b);
  std::printf("    %s\n", x.max_key != y.max_key
                               ? "the kernels had seen different keys: each rounds this P against another maximum, "
                                 "and the later rescaling by alpha does not undo the rounding"
                               : "the same maximum: the exponent's arithmetic (its units, a fused or rounded multiply, "
                                 "the exponential) gives another fp32 P");
}

// Which of a row's values part first between two kernels, for one element.
void print_where_rows_part(const std::array<attention_problem, 2>& problems, const std::array<bfloat16, 2>& results,
                           std::size_t head, std::size_t row, std::size_t col) {
  const row_outcome a = trace_row(problems[0], head, row, col), b = trace_row(problems[1], head, row, col);
  std::printf("  A visited K/V blocks %s\n  B visited K/V blocks %s\n", a.blocks.c_str(), b.blocks.c_str());
  const auto stage = [](std::string_view what, float32 x, float32 y) {
    std::printf("  %-31s A %s  B %s%s\n", std::string(what).c_str(), value_text(x).c_str(), value_text(y).c_str(),
                x.bits == y.bits ? "  same" : fmt::format("  B {:+} fp32 ulps", ulp_steps(x, y)).c_str());
  };
  stage("row sum l", a.sum, b.sum);
  stage("O before normalisation", a.unnormalised, b.unnormalised);
  stage("O normalised (fp32)", a.normalised, b.normalised);
  std::printf("  %-31s A %s  B %s\n", "O (bf16)", value_text(results[0]).c_str(), value_text(results[1]).c_str());
  const bool sums_differ_in_kind = (problems[0].kernel().row_sum == attention::row_sum_rule::thread_partials_of_p_bar) !=
                                   (problems[1].kernel().row_sum == attention::row_sum_rule::thread_partials_of_p_bar);
  std::printf("  where they part: %s\n",
              a.sum.bits != b.sum.bits && sums_differ_in_kind
                  ? "already in the row sum (one kernel sums the fp32 P, the other the e4m3 P-bar)"
              : a.sum.bits != b.sum.bits ? "already in the row sum (the exponentials, their units or their order)"
              : a.unnormalised.bits != b.unnormalised.bits
                  ? "in the unnormalised O (P, its rescaling or the P V steps); the row sums agree"
                  : a.normalised.bits != b.normalised.bits ? "in the normalisation; the row sum and unnormalised O agree"
                                                           : "in the bf16 conversion; every fp32 value agrees");
  print_first_key_apart(a, b, problems[0].kernel().p_scale, problems[1].kernel().p_scale);
}

// --compare A B: both kernels on the files, how their O and L differ, and for
// the first differing element of O where the two rows part.
int compare_kernels(const attention_options& options) {
  std::array<attention_problem, 2> problems;
  std::array<attention::attention_output, 2> out;
  for (std::size_t side = 0; side < 2; ++side) {
    attention_options one = options;
    one.call.model = options.compare[side];
    problems[side] = read_problem(one);
    if (problems[side].call.o_format() != bf16)
      fail("attention: --compare follows kernels that write bf16 O; " + problems[side].options.call.model.name() +
           " writes " + std::string(name_of(problems[side].call.o_format())) +
           ": run each kernel with --out-o and compare the files");
  }
  const attention_problem& p = problems[0];
  std::printf("attention: Q %s, K and V %s, %s\n", shape_text(p.q.file_shape).c_str(), shape_text(p.k.file_shape).c_str(),
              options.call.shape.causal ? "causal" : "not causal");
  for (std::size_t side = 0; side < 2; ++side)
    std::printf("%s %s: tiles %d rows x %d keys, %d split%s\n", side == 0 ? "A" : "B",
                problems[side].options.call.model.name().c_str(), problems[side].kernel().block_m, problems[side].kernel().block_n,
                problems[side].kernel().splits, problems[side].kernel().splits == 1 ? "" : "s");
  std::fflush(stdout);  // the summary shows at once, piped too, before what may take minutes
  for (std::size_t side = 0; side < 2; ++side) out[side] = compute(problems[side]).bits;
  print_differences("O", "bf16", out[0].o, out[1].o);
  const bool same_lse_units = problems[0].kernel().lse_natural_units == problems[1].kernel().lse_natural_units;
  if (same_lse_units) print_differences("L", "fp32", out[0].lse, out[1].lse);
  else std::printf("L: not compared, one kernel writes it in natural-log units and the other in base 2\n");
  std::size_t first = 0;
  while (first < out[0].o.size() && out[0].o[first].bits == out[1].o[first].bits) ++first;
  if (first == out[0].o.size()) return !same_lse_units || out[0].lse == out[1].lse ? 0 : 1;
  const std::size_t d = p.q.head_dim, rows = p.q.rows;
  std::printf("first differing element of O: %s\n", index_text(p, first / d / rows, first / d % rows, first % d).c_str());
  if (problems[0].kernel().splits > 1 || problems[1].kernel().splits > 1)
    std::printf("  (a split-KV kernel's row values are per split, merged by its combine kernel: give --splits 1, or\n"
                "  --batch-heads with the call's B and H, to follow the row through one pass)\n");
  else
    print_where_rows_part(problems, {out[0].o[first], out[1].o[first]}, first / d / rows, first / d % rows, first % d);
  return 1;
}

}  // namespace bitexact::cli::attention_parts
