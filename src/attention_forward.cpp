// `bitexact attention`'s forward pass: the files' call resolved by the
// library (attention/call.hpp), computed, written, and compared with what a
// GPU wrote.
#include <bitexact/hardware/mufu_tables.hpp>

#include "attention.hpp"

namespace bitexact::cli::attention_parts {

// A call's refusal with the option spelled as this command takes it.
[[noreturn]] void fail_call(const attention::call_error& error) {
  const attention::call_option option = error.option();
  std::string flag = "--" + std::string(name_of(option));
  std::replace(flag.begin(), flag.end(), '_', '-');
  if (option == attention::call_option::autocast) flag = "--no-autocast";
  fail("attention: " + printable(error.message(flag)));
}

// Q, K and V as the call's model takes them: uint8 fp8 bit patterns for an fp8
// kernel, bf16 for every other model; the first file that is not is named.
void check_operand_formats(const attention_problem& p) {
  const bool fp8 = p.call.fp8();
  const std::string& name = p.options.call.model.name();
  const std::pair<const operand_tensor*, const std::string*> files[] = {
      {&p.q, &p.options.q_path}, {&p.k, &p.options.k_path}, {&p.v, &p.options.v_path}};
  for (const auto& [tensor, path] : files) {
    if (tensor->fp8() == fp8) continue;
    if (fp8)
      fail(printable(*path) + ": holds bf16, but " + name + " takes " + std::string(name_of(p.kernel().inputs)) +
           " Q, K and V as uint8 bit patterns (x.view(torch.uint8))");
    fail(printable(*path) + ": uint8 elements are fp8 bit patterns, but " + name +
         " takes bf16 Q, K and V (the fp8 presets: " +
         attention::preset_names_where([](const attention::preset& pr) {
           return pr.description && attention::is_fp8(pr.description().arithmetic.inputs);
         }) + ")");
  }
}

attention_problem read_problem(const attention_options& options) {
  attention_problem p{options, read_operand(options.q_path, "Q"), read_operand(options.k_path, "K"),
                      read_operand(options.v_path, "V"), {}, true, {}};
  // The file named is the one the other two disagree with: Q when K and V agree, else K or V.
  const auto like_q = [&p](const operand_tensor& t) {
    return t.file_shape.size() == p.q.file_shape.size() && t.batch == p.q.batch && t.heads == p.q.heads &&
           t.head_dim == p.q.head_dim;
  };
  const std::string expected_kv = p.q.file_shape.size() == 4
                                      ? fmt::format("[{}, {}, N, {}]", p.q.batch, p.q.heads, p.q.head_dim)
                                      : fmt::format("[N, {}]", p.q.head_dim);
  if (p.v.file_shape == p.k.file_shape && !like_q(p.k))
    fail(printable(options.q_path) + ": Q has shape " + shape_text(p.q.file_shape) + ", but K and V have " +
         shape_text(p.k.file_shape) + "; Q needs their " +
         (p.k.file_shape.size() == 4 ? "B, H and d" : "d") + (p.k.file_shape.size() != p.q.file_shape.size()
                                                                 ? " and as many dimensions" : ""));
  if (p.v.file_shape != p.k.file_shape && like_q(p.v) && !like_q(p.k))
    fail(printable(options.k_path) + ": K has shape " + shape_text(p.k.file_shape) + "; expected " + expected_kv +
         " to match Q's " + shape_text(p.q.file_shape) + " and V's " + shape_text(p.v.file_shape));
  if (p.v.file_shape != p.k.file_shape && like_q(p.k) && !like_q(p.v))
    fail(printable(options.v_path) + ": V has shape " + shape_text(p.v.file_shape) + "; expected K's shape " +
         shape_text(p.k.file_shape));
  // Both agree with Q (they differ in N, which Q does not decide), or neither does: both are named.
  if (p.v.file_shape != p.k.file_shape)
    fail(printable(options.k_path) + " " + shape_text(p.k.file_shape) + " and " + printable(options.v_path) + " " +
         shape_text(p.v.file_shape) + ": K and V need the same shape");
  p.four_d = p.q.file_shape.size() == 4;
  attention::attention_call call = options.call;
  call.shape = {static_cast<int>(p.q.batch), static_cast<int>(p.q.heads), static_cast<int>(p.q.rows),
                static_cast<int>(p.k.rows), static_cast<int>(p.q.head_dim), options.call.shape.causal};
  try {
    p.call = attention::resolve_call(call);
  } catch (const attention::call_error& error) {
    fail_call(error);
  } catch (const std::invalid_argument& error) {
    fail(printable(options.q_path) + ": " + error.what());
  }
  check_operand_formats(p);
  if (!options.explain.empty()) p.explain = parse_element_index(options.explain, p.q, p.four_d);
  if (p.call.kernel) {
    try {
      ptx::mufu_tables::shared();  // loaded once, here, so that a missing table is one error before any output
    } catch (const mufu_data_error& error) {
      std::string message = error.what();
      if (message.rfind("bitexact: ", 0) == 0) message.erase(0, 10);
      fail(printable(message));
    }
  }
  return p;
}

// Every head of the files, as the call's model computes them.
attention_result compute(const attention_problem& p) {
  const std::size_t heads = p.head_count(), rows = p.q.rows, d = p.q.head_dim;
  attention_result result;
  try {
    progress_line progress(p.options.call.model.name(), "rows", heads * rows);
    const attention::rows_done told = [&progress](int done) { progress.add(static_cast<std::uint64_t>(done)); };
    if (p.call.fp64()) {
      result.o.resize(heads * rows * d), result.lse.resize(heads * rows);
      attention::forward_fp64(p.call, p.q.values, p.k.values, p.v.values, result.o, result.lse, told);
    } else if (p.call.fp8() && p.call.o_format() == e4m3) {
      result.o8.resize(heads * rows * d), result.bits.lse.resize(heads * rows);
      attention::forward(p.call, p.q.fp8_bits, p.k.fp8_bits, p.v.fp8_bits, result.o8, result.bits.lse, told);
    } else if (p.call.fp8()) {
      result.bits.o.resize(heads * rows * d), result.bits.lse.resize(heads * rows);
      attention::forward(p.call, p.q.fp8_bits, p.k.fp8_bits, p.v.fp8_bits, result.bits.o, result.bits.lse, told);
    } else {
      result.bits.o.resize(heads * rows * d), result.bits.lse.resize(heads * rows);
      attention::forward(p.call, p.q.values, p.k.values, p.v.values, result.bits.o, result.bits.lse, told);
    }
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  return result;
}

std::string kernel_text(const flash_kernel& kernel, int key_rows, const std::string& split_source) {
  const int key_blocks = (key_rows + kernel.block_n - 1) / kernel.block_n;
  return fmt::format("{} {} ({}), tiles {} rows x {} keys, {} K/V block{}", kernel.splits,
                     kernel.splits > 1 ? "splits" : "split", split_source, kernel.block_m, kernel.block_n, key_blocks,
                     key_blocks == 1 ? "" : "s");
}

void print_summary(const attention_problem& p) {
  const attention_shape& s = p.call.launch;
  if (!p.options.call.model.gpu_kernel()) {
    std::printf("attention: Q %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
                shape_text(p.k.file_shape).c_str(), p.options.call.shape.causal ? "causal" : "not causal",
                fmt::format("{}{}", p.call.paper.scale, p.options.call.scale ? "" : ", the default d ** -0.5").c_str());
    const int key_blocks = (s.key_rows + p.call.paper.block_n - 1) / p.call.paper.block_n;
    if (p.options.call.model.is(attention::preset_kind::paper_reference_fp64))
      std::printf("preset paper_reference_fp64: softmax attention in double, no tiles (O and L written as float64)\n");
    else
      std::printf("preset %s: the paper's flash attention in PyTorch (attention.py, %s), tiles %d rows x %d keys, "
                  "%d K/V block%s\n",
                  p.options.call.model.name().c_str(),
                  p.call.paper.autocast ? "under bf16 autocast" : "bf16 tensors, no autocast", p.call.paper.block_m,
                  p.call.paper.block_n, key_blocks, key_blocks == 1 ? "" : "s");
    if (p.call.paper.stabilize)
      std::printf("stabilized softmax: beta %s, eps %s\n", fmt::format("{}", to_host(p.call.paper.stabilize->beta)).c_str(),
                  fmt::format("{}", to_host(p.call.paper.stabilize->epsilon)).c_str());
    return;
  }
  // The call's scale as the kernel takes it, a float (an fp8 kernel of FA2's recipe folds descales into its own).
  const float32 scale = from_host(static_cast<float>(
      p.options.call.scale ? *p.options.call.scale : 1.0 / std::sqrt(static_cast<double>(p.q.head_dim))));
  std::printf("attention: Q %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
              shape_text(p.k.file_shape).c_str(), p.options.call.shape.causal ? "causal" : "not causal",
              fmt::format("{} (0x{:08X}){}", to_host(scale), scale.bits,
                          p.options.call.scale ? "" : ", the default 1/sqrt(d)")
                  .c_str());
  const std::string split_source =
      p.options.call.model.description().split == attention::split_policy::none ? std::string("no split-KV path")
      : p.options.call.splits ? std::string("from --splits")
                       : fmt::format("the heuristic's for B {}, H {}{}", s.batch, s.heads,
                                     p.options.call.batch_heads ? ", from --batch-heads" : "");
  std::printf("preset %s: %s\n", p.options.call.model.name().c_str(),
              kernel_text(p.kernel(), s.key_rows, split_source).c_str());
  if (p.call.fp8()) {
    std::string scales;
    for (std::size_t i = 0; i < p.call.call.fp8_scales.size(); ++i) {
      const std::optional<double>& given = p.call.call.fp8_scales[i];
      scales += fmt::format("{}{} {}", i ? ", " : "", attention::fp8_scale_names[i],
                            given ? static_cast<float>(*given) : 1.0f);
    }
    std::printf("%s Q, K and V; %s (O %s)\n", std::string(name_of(p.kernel().inputs)).c_str(), scales.c_str(),
                std::string(name_of(p.kernel().o_format)).c_str());
    if (p.kernel().scale != scale)
      std::printf("the scores' scale RN(RN(scale * descale_q) * descale_k): %s\n",
                  fmt::format("{} (0x{:08X})", to_host(p.kernel().scale), p.kernel().scale.bits).c_str());
  }
  if (p.kernel().stabilize)
    std::printf("stabilized softmax%s: beta %s, eps %s\n", p.kernel().stabilize->across_blocks ? " across blocks" : "",
                fmt::format("{}", to_host(p.kernel().stabilize->beta)).c_str(),
                fmt::format("{}", to_host(p.kernel().stabilize->epsilon)).c_str());
}

// Counts and reports the mismatches of one output; returns how many and the first.
template <format F>
std::pair<std::uint64_t, std::size_t> compare(const attention_problem& p, std::string_view name,
                                              const std::vector<value<F>>& model, const std::vector<value<F>>& expected,
                                              std::size_t row_length) {
  std::uint64_t mismatches = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < model.size(); ++i)
    if (model[i].bits != expected[i].bits && mismatches++ == 0) first = i;
  std::printf("%s: %s compared, %s\n", std::string(name).c_str(), counted(model.size(), "element", "elements").c_str(),
              counted(mismatches, "mismatch", "mismatches").c_str());
  if (mismatches == 0) return {0, 0};
  const difference_summary s = differences_of(expected, model);
  std::printf("  distance in %s ulps %s%s; the model above the file: %llu, below: %llu\n", std::string(name_of(F)).c_str(),
              s.distances().c_str(), s.nan ? fmt::format("; NaN on one side: {}", s.nan).c_str() : "",
              static_cast<unsigned long long>(s.above), static_cast<unsigned long long>(s.differ - s.above - s.nan));
  // A kernel's output matches its model bit for bit or misses in a few places; a file off by an ulp or two
  // in many elements, in both directions, is a differently rounded result.
  if (s.differ * 100 >= model.size() && s.within(4) * 100 >= s.differ * 85 && s.above * 5 >= s.differ &&
      (s.differ - s.above - s.nan) * 5 >= s.differ)
    std::printf("  (%.1f%% of the elements differ, nearly all by 1 to 4 ulps either way: the file looks like another "
                "rounding of the same result, a higher-precision reference or another kernel, rather than this "
                "kernel's output)\n", 100.0 * static_cast<double>(s.differ) / static_cast<double>(model.size()));
  const std::size_t rows = p.q.rows;
  const std::size_t row_index = first / row_length, head = row_index / rows, row = row_index % rows;
  const std::optional<std::size_t> col = row_length > 1 ? std::optional<std::size_t>(first % row_length) : std::nullopt;
  // The file is the output under test, the model the reference: named so, not "expected".
  std::printf("first mismatch in %s at %s\n  file     %s\n  model    %s\n%s", std::string(name).c_str(),
              index_text(p, head, row, col).c_str(), value_text(expected[first]).c_str(),
              value_text(model[first]).c_str(),
              explainable(p.kernel()) && p.options.call.model.gpu_kernel() ? describe_row(p, row).c_str() : "");
  return {mismatches, first};
}

// The forward pass on the files: O and L written, compared with the files expected, and the
// elements asked for (--explain) or the first mismatch of O explained.
int forward_pass(const attention_options& options) {
  const attention_problem problem = read_problem(options);
  const expectations expected = read_expectations(problem);
  print_summary(problem);
  std::fflush(stdout);  // the summary shows at once, piped too, before what may take minutes
  const attention_result computed = compute(problem);
  const attention::attention_output& result = computed.bits;
  write_outputs(problem, computed);
  std::uint64_t mismatches = 0;
  std::optional<element_index> first_o_mismatch;
  if (expected.o8) mismatches += compare(problem, "O", computed.o8, *expected.o8, problem.q.head_dim).first;
  if (expected.o) {
    const auto [count, first] = compare(problem, "O", result.o, *expected.o, problem.q.head_dim);
    const std::size_t rows = problem.q.rows, d = problem.q.head_dim;
    if (count > 0) first_o_mismatch = element_index{first / d / rows, first / d % rows, first % d};
    mismatches += count;
  }
  if (expected.lse) {
    if (expected.lse_padded_rows)
      std::printf("L: the file's rows %zu to %zu of each head are padding (+inf), not compared\n", problem.q.rows,
                  expected.lse_padded_rows - 1);
    mismatches += compare(problem, "L", result.lse, *expected.lse, 1).first;
  }
  if (problem.explain) {
    const element_index& at = *problem.explain;
    const std::size_t flat = (at.head * problem.q.rows + at.row) * problem.q.head_dim + at.col;
    print_explanation(problem, at, expected.o ? std::optional<bfloat16>((*expected.o)[flat]) : std::nullopt);
  }
  if (first_o_mismatch && problem.options.call.model.gpu_kernel() && explainable(problem.kernel())) {
    const element_index& at = *first_o_mismatch;
    const std::size_t flat = (at.head * problem.q.rows + at.row) * problem.q.head_dim + at.col;
    if (!problem.explain || problem.explain->head != at.head || problem.explain->row != at.row ||
        problem.explain->col != at.col)
      print_explanation(problem, at, (*expected.o)[flat]);
  }
  return mismatches ? 1 : 0;
}
}  // namespace bitexact::cli::attention_parts
