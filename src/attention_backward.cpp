// `bitexact attention --backward DO.npy`: PyTorch's flash backward on the
// files' heads, dQ in the deterministic order of the call's GPU.
#include <bitexact/attention/flash_backward.hpp>

#include "attention.hpp"

namespace bitexact::cli::attention_parts {

// A file of bf16 values with the shape of Q or of K (--forward-o, --expect-dq, ...).
std::vector<bfloat16> read_like(const std::string& path, std::string_view what, const operand_tensor& like,
                                std::string_view like_name) {
  const npy::array array = read_npy(path);
  if (array.shape != like.file_shape)
    fail(printable(path) + ": " + std::string(what) + " has shape " + shape_text(array.shape) + "; expected " +
         std::string(like_name) + "'s shape " + shape_text(like.file_shape));
  return bf16_elements(array, path);
}

// A float32 file of one value per query row ([B, H, N] or [N]): L, delta.
std::vector<float32> read_rows(const attention_problem& p, const std::string& path, std::string_view what) {
  const npy::array array = read_npy(path, "float32");
  if (array.shape != lse_shape(p))
    fail(printable(path) + ": " + std::string(what) + " has shape " + shape_text(array.shape) + "; expected " +
         shape_text(lse_shape(p)));
  if (array.descr != "<f4")
    fail(printable(path) + ": element type '" + array.descr + "' is not float32");
  std::vector<float32> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float32::from_bits(array.word(i));
  return values;
}

template <format F>
void write_values(const std::string& path, const std::vector<std::size_t>& shape, const std::vector<value<F>>& values) {
  if (path.empty()) return;
  std::vector<std::conditional_t<F.width() == 16, std::uint16_t, std::uint32_t>> bits(values.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<decltype(bits[i] + 0)>(values[i].bits);
  try {
    npy::write(path, F.width() == 16 ? "<u2" : "<f4", shape, bits.data());
  } catch (const npy::npy_error& error) {
    fail(printable(error.what()));
  }
}

// --backward: PyTorch's flash backward (attention/flash_backward.hpp) on the
// files' heads, dQ in the deterministic order.
int backward_pass(const attention_options& options) {
  const attention_problem p = read_problem(options);
  const operand_tensor d_o = read_operand(options.backward_do, "dO");
  if (d_o.file_shape != p.q.file_shape)
    fail(printable(options.backward_do) + ": dO has shape " + shape_text(d_o.file_shape) + "; expected Q's shape " +
         shape_text(p.q.file_shape));
  std::vector<bfloat16> o;
  std::vector<float32> lse;
  if (!options.forward_o.empty()) o = read_like(options.forward_o, "O", p.q, "Q");
  if (!options.forward_lse.empty()) lse = read_rows(p, options.forward_lse, "L");
  std::optional<std::vector<bfloat16>> expected_dq, expected_dk, expected_dv;
  std::optional<std::vector<float32>> expected_delta;
  if (!options.expect_dq.empty()) expected_dq = read_like(options.expect_dq, "dQ", p.q, "Q");
  if (!options.expect_dk.empty()) expected_dk = read_like(options.expect_dk, "dK", p.k, "K");
  if (!options.expect_dv.empty()) expected_dv = read_like(options.expect_dv, "dV", p.k, "K");
  if (!options.expect_delta.empty()) expected_delta = read_rows(p, options.expect_delta, "delta");
  attention::flash_backward_kernel kernel;
  try {
    kernel = attention::backward_kernel(p.call);
  } catch (const std::invalid_argument& error) {
    fail(printable(options.q_path) + ": " + error.what());
  }
  const attention_shape& call = p.call.launch;
  std::printf("attention backward: Q and dO %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
              shape_text(p.k.file_shape).c_str(), options.call.shape.causal ? "causal" : "not causal",
              fmt::format("{} (0x{:08X})", to_host(kernel.scale), kernel.scale.bits).c_str());
  std::printf("PyTorch's flash backward (FA2, sm_90): tiles %d query rows x %d keys; O and L %s; dQ in the "
              "deterministic order, %d buffer%s (B %d, H %d%s, %s: %d SMs)\n",
              kernel.block_m, kernel.block_n,
              options.forward_o.empty() || options.forward_lse.empty() ? "partly computed by pytorch_sdpa_flash_sm90"
                                                                         : "from the files",
              kernel.dq_splits, kernel.dq_splits == 1 ? "" : "s", call.batch, call.heads,
              options.call.batch_heads ? ", from --batch-heads" : "", std::string(options.call.device.name).c_str(),
              options.call.device.sm_count);
  std::fflush(stdout);  // the summary shows at once, piped too, before what may take minutes
  if (o.empty() || lse.empty()) {  // the forward pass the backward follows, as the preset computes it
    const attention_result forward = compute(p);
    if (o.empty()) o = forward.bits.o;
    if (lse.empty()) lse = forward.bits.lse;
  }
  const std::size_t heads = p.head_count(), rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  std::vector<bfloat16> dq(heads * rows * d), dk(heads * keys * d), dv(heads * keys * d);
  std::vector<float32> delta(heads * rows);
  try {
    progress_line progress("backward", "key rows", heads * keys);
    attention::backward(p.call, kernel, p.q.values, p.k.values, p.v.values, o, lse, d_o.values, {dq, dk, dv, delta},
                        [&progress](int done) { progress.add(static_cast<std::uint64_t>(done)); });
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  write_values(options.out_dq, p.q.file_shape, dq);
  write_values(options.out_dk, p.k.file_shape, dk);
  write_values(options.out_dv, p.k.file_shape, dv);
  write_values(options.out_delta, lse_shape(p), delta);
  std::uint64_t mismatches = 0;
  const auto check = [&](std::string_view name, const auto& model, const auto& expected, std::size_t n_rows,
                         std::size_t row_length, bool key_rows) {
    if (!expected) return;
    std::uint64_t bad = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < model.size(); ++i)
      if (model[i].bits != (*expected)[i].bits && bad++ == 0) first = i;
    std::printf("%s: %s compared, %s\n", std::string(name).c_str(), counted(model.size(), "element", "elements").c_str(),
                counted(bad, "mismatch", "mismatches").c_str());
    mismatches += bad;
    if (bad == 0) return;
    const std::size_t row_index = first / row_length, row = row_index % n_rows;
    const std::optional<std::size_t> col = row_length > 1 ? std::optional<std::size_t>(first % row_length) : std::nullopt;
    std::printf("first mismatch in %s at %s\n  file     %s\n  model    %s\n", std::string(name).c_str(),
                index_text(p, row_index / n_rows, row, col).c_str(), value_text((*expected)[first]).c_str(),
                value_text(model[first]).c_str());
    const long bm = kernel.block_m, bn = kernel.block_n, n_q = static_cast<long>(rows), n_k = static_cast<long>(keys);
    if (key_rows) {
      const long block = static_cast<long>(row) / bn;
      const long m_min = attention::first_query_block(kernel, p.call.head, block);
      std::printf("  key %zu: key block %ld (keys %ld..%ld); its sum runs over query blocks %ld down to %ld, 16 rows "
                  "a tensor-core step\n",
                  row, block, block * bn, std::min((block + 1) * bn, n_k) - 1, (n_q + bm - 1) / bm - 1, m_min);
    } else if (name == "dQ") {
      std::printf("  row %zu: query block %ld; its dQ adds one tile per key block that reaches it, dealt to %d "
                  "buffer%s and summed buffer by buffer (torch.use_deterministic_algorithms(True); the count is "
                  "ceil(SMs / (B H)) for the call's B and H: --batch-heads, --gpu); without it the GPU adds the tiles in an "
                  "order that varies from run to run, and dQ alone differs by an ulp or two in a few elements\n",
                  row, static_cast<long>(row) / bm, kernel.dq_splits, kernel.dq_splits == 1 ? "" : "s");
    }
  };
  check("dQ", dq, expected_dq, rows, d, false);
  check("dK", dk, expected_dk, keys, d, true);
  check("dV", dv, expected_dv, keys, d, true);
  check("delta", delta, expected_delta, rows, 1, false);
  return mismatches ? 1 : 0;
}

}  // namespace bitexact::cli::attention_parts
