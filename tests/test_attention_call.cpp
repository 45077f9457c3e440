// The GPU records (hardware/gpu.hpp) and the call layer (attention/call.hpp)
// that the command and the binding share: which GPU a name means, what each
// option changes, and the refusals, each naming its option.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/kernel_json.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

std::vector<bfloat16> ramp(std::size_t n, unsigned seed) {
  std::vector<bfloat16> x(n);
  unsigned state = seed;
  for (bfloat16& v : x) {
    state = state * 1664525u + 1013904223u;
    v = convert<bf16>(from_host(static_cast<float>(static_cast<int>(state >> 20) - 2048) / 1024.0f)).result;
  }
  return x;
}

attention_call call_of(int heads, int rows, int head_dim = 64) {
  attention_call call;
  call.shape = {1, heads, rows, rows, head_dim, false};
  return call;
}

// The option a refusal names, or nullopt when the call resolves.
std::optional<call_option> refused_for(const attention_call& call) {
  try {
    resolve_call(call);
  } catch (const call_error& error) {
    return error.option();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("GPU records: names are unique, the default is the H100 SXM, every GPU runs the sm90 units") {
  std::set<std::string_view> names;
  for (const gpu& g : gpus) {
    CHECK(names.insert(g.name).second);
    CHECK(g.sm_count > 0);
    CHECK(g.arch->instruction_of(sm90_tensor_core) != nullptr);
    CHECK(g.arch->instruction_of(sm90_tensor_core_k8) != nullptr);
    CHECK(g.arch->instruction_of(sm80_tensor_core) == nullptr);
    CHECK_FALSE(g.arch->mufu_tables.empty());
  }
  CHECK(names.size() == 3);
  CHECK(default_gpu().name == "h100_sxm");
  CHECK(find_gpu("h100_pcie").sm_count == 114);
  CHECK(find_gpu("h200").sm_count == find_gpu("h100_sxm").sm_count);
  CHECK_THROWS_WITH_AS(find_gpu("a100"), "unknown GPU 'a100'; the GPUs are: h100_sxm, h100_pcie, h200",
                       std::invalid_argument);
  CHECK(find_architecture("sm_80").mma_unit() == sm80_tensor_core);
  CHECK(find_architecture("sm_90").mma_unit(fp16) == sm90_tensor_core);
  // The measured units of the narrow inputs: wgmma k32's for fp8, k8's for tf32.
  CHECK(find_architecture("sm_90").mma_unit(e4m3) == sm90_tensor_core_fp8);
  CHECK(find_architecture("sm_90").mma_unit(e5m2) == sm90_tensor_core_fp8);
  CHECK(find_architecture("sm_90").mma_unit(tf32) == sm90_tensor_core_k8);
  CHECK_THROWS_WITH_AS(find_architecture("sm_80").mma_unit(e4m3),
                       "no tensor-core unit of sm_80 is measured for e4m3 inputs (sm80 takes bf16, fp16)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(find_architecture("sm_70"), "unknown architecture 'sm_70'; the architectures are: sm_90, sm_80",
                       std::invalid_argument);
}

TEST_CASE("GPU records: every tensor-core unit name reads back as its unit in a kernel description") {
  int units = 0;
  for (const architecture& a : architectures)
    for (const tensor_core_instruction& i : a.tensor_cores) {
      // A unit without bf16 (sm90_fp8) in the fp8 kernel's description, whose inputs it takes.
      kernel_description d =
          i.takes(bf16) ? pytorch_sdpa_flash_sm90_description() : cudnn_sdpa_fp8_sm90_description();
      d.arithmetic.tensor_core = i.unit;
      const kernel_description back = kernel_from_json(kernel_to_json(d).dump());
      CHECK(back.arithmetic.tensor_core == i.unit);
      CHECK(kernel_to_json(d)["tensor_core"] == std::string(i.unit_name));
      CHECK(&find_tensor_core_unit(i.unit_name) == &i);
      ++units;
    }
  CHECK(units == 4);
  CHECK_THROWS_WITH_AS(find_tensor_core_unit("sm100"),
                       "unknown tensor-core unit 'sm100'; the units are: sm90, sm90_k8, sm90_fp8, sm80",
                       std::invalid_argument);
}

TEST_CASE("call: the GPU's SM count decides the split count, and so the bits") {
  // 8 heads of 1000 rows: 2 splits on 132 SMs, 4 on 114.
  attention_call call = call_of(8, 1000);
  CHECK(resolve_call(call).kernel->splits == 2);
  call.device = find_gpu("h100_pcie");
  CHECK(resolve_call(call).kernel->splits == 4);
  call.device = find_gpu("h200");
  CHECK(resolve_call(call).kernel->splits == 2);
  // One head of that call: batch_heads gives the heuristic the whole call.
  attention_call head = call_of(1, 1000);
  head.batch_heads = std::pair{1, 8};
  head.device = find_gpu("h100_pcie");
  const resolved_call r = resolve_call(head);
  CHECK(r.kernel->splits == 4);
  const std::vector<bfloat16> q = ramp(1000 * 64, 1), k = ramp(1000 * 64, 2), v = ramp(1000 * 64, 3);
  std::vector<bfloat16> o_pcie(q.size()), o_sxm(q.size());
  std::vector<float32> lse(1000);
  forward(r, q, k, v, o_pcie, lse);
  head.device = default_gpu();
  forward(resolve_call(head), q, k, v, o_sxm, lse);
  int differ = 0;
  for (std::size_t i = 0; i < q.size(); ++i) differ += o_pcie[i].bits != o_sxm[i].bits;
  MESSAGE(differ << " of " << q.size() << " elements of O differ between 4 splits (h100_pcie) and 2 (h100_sxm)");
  CHECK(differ > 0);
}

TEST_CASE("call: the backward's dQ buffers come from the GPU's SM count") {
  attention_call call = call_of(1, 256);
  CHECK(backward_kernel(resolve_call(call)).dq_splits == 132);
  call.device = find_gpu("h100_pcie");
  CHECK(backward_kernel(resolve_call(call)).dq_splits == 114);
  call.batch_heads = std::pair{2, 4};
  CHECK(backward_kernel(resolve_call(call)).dq_splits == 15);  // ceil(114 / 8)
}

TEST_CASE("call: each option a model does not read is refused, naming the option") {
  const float32 two = from_host(2.0f);
  attention_call call = call_of(1, 64);
  CHECK_FALSE(refused_for(call));
  call.beta = two;  // the standard kernel has no stabilized rule
  CHECK(refused_for(call) == call_option::beta);
  call.model = model_choice(find_preset("pytorch_sdpa_flash_sm90_stabilized"));
  CHECK_FALSE(refused_for(call));
  call.model = model_choice(find_preset("paper_reference"));
  CHECK(refused_for(call) == call_option::beta);
  call.beta.reset();
  call.epsilon = two;
  CHECK(refused_for(call) == call_option::eps);
  call.epsilon.reset();
  call.splits = 2;  // the paper's arithmetic has no split-KV path
  CHECK(refused_for(call) == call_option::splits);
  call.splits.reset();
  call.batch_heads = std::pair{1, 4};
  CHECK(refused_for(call) == call_option::batch_heads);
  call.batch_heads.reset();
  call.shape.key_rows = 32;
  call.shape.causal = true;
  CHECK(refused_for(call) == call_option::causal);
  call.shape.causal = false;
  CHECK_FALSE(refused_for(call));
  call.model = model_choice();
  call.autocast = false;  // autocast is the paper presets' only
  CHECK(refused_for(call) == call_option::autocast);
  call.autocast = true;
  call.splits = 129;
  CHECK(refused_for(call) == call_option::splits);
  call.splits.reset();
  call.batch_heads = std::pair{1, 0};
  CHECK(refused_for(call) == call_option::batch_heads);
  call.shape.heads = 4;
  call.batch_heads = std::pair{1, 2};  // fewer heads than the tensors hold
  CHECK(refused_for(call) == call_option::batch_heads);
  call.batch_heads.reset();
  call.model = model_choice(find_preset("pytorch_sdpa_flash_sm90_stabilized_across_blocks"));
  call.scale = -0.5;
  CHECK(refused_for(call) == call_option::scale);
}

TEST_CASE("call: numbers outside what the model reads are refused, naming the option") {
  attention_call call = call_of(1, 64);
  call.model = model_choice(find_preset("pytorch_sdpa_flash_sm90_stabilized"));
  for (const double scale : {std::nan(""), HUGE_VAL, 1e39}) {  // 1e39 overflows a float
    call.scale = scale;
    CHECK(refused_for(call) == call_option::scale);
  }
  call.scale.reset();
  call.beta = from_host(0.5f);
  CHECK(refused_for(call) == call_option::beta);
  call.beta = from_host(std::numeric_limits<float>::quiet_NaN());
  CHECK(refused_for(call) == call_option::beta);
  call.beta.reset();
  call.epsilon = from_host(-1.0f);
  CHECK(refused_for(call) == call_option::eps);
  call.epsilon = from_host(0.0f);
  CHECK_FALSE(refused_for(call));
  for (const int threads : {-1, max_threads + 1}) {
    call.threads = threads;
    CHECK(refused_for(call) == call_option::threads);
  }
  call.threads = max_threads;
  CHECK_FALSE(refused_for(call));
}

namespace {

// Every output of a forward call on `threads` threads, as bit patterns: O and
// L, or paper_reference_fp64's doubles.
std::vector<std::uint64_t> forward_bits(attention_call call, int threads) {
  call.threads = threads;
  const resolved_call r = resolve_call(call);
  const std::size_t heads = r.head_count(), rows = static_cast<std::size_t>(call.shape.query_rows);
  const std::size_t d = static_cast<std::size_t>(call.shape.head_dim);
  const std::size_t kv = heads * static_cast<std::size_t>(call.shape.key_rows) * d;
  const std::vector<bfloat16> q = ramp(heads * rows * d, 1), k = ramp(kv, 2), v = ramp(kv, 3);
  std::vector<std::uint64_t> bits;
  if (r.fp64()) {
    std::vector<double> o(q.size()), lse(heads * rows);
    forward_fp64(r, q, k, v, o, lse);
    for (const double x : o) bits.push_back(std::bit_cast<std::uint64_t>(x));
    for (const double x : lse) bits.push_back(std::bit_cast<std::uint64_t>(x));
    return bits;
  }
  std::vector<bfloat16> o(q.size());
  std::vector<float32> lse(heads * rows);
  forward(r, q, k, v, o, lse);
  for (const bfloat16 x : o) bits.push_back(x.bits);
  for (const float32 x : lse) bits.push_back(x.bits);
  return bits;
}

// dQ, dK, dV and delta of the flash backward on `threads` threads, as bit patterns.
std::vector<std::uint64_t> backward_bits(attention_call call, int threads) {
  call.threads = threads;
  const resolved_call r = resolve_call(call);
  const std::size_t heads = r.head_count(), rows = static_cast<std::size_t>(call.shape.query_rows);
  const std::size_t d = static_cast<std::size_t>(call.shape.head_dim);
  const std::size_t kv = heads * static_cast<std::size_t>(call.shape.key_rows) * d;
  const std::vector<bfloat16> q = ramp(heads * rows * d, 1), k = ramp(kv, 2), v = ramp(kv, 3), d_o = ramp(q.size(), 4);
  std::vector<bfloat16> o(q.size()), dq(q.size()), dk(kv), dv(kv);
  std::vector<float32> lse(heads * rows), delta(heads * rows);
  forward(r, q, k, v, o, lse);
  backward(r, backward_kernel(r), q, k, v, o, lse, d_o, {dq, dk, dv, delta});
  std::vector<std::uint64_t> bits;
  for (const auto* x : {&dq, &dk, &dv})
    for (const bfloat16 y : *x) bits.push_back(y.bits);
  for (const float32 x : delta) bits.push_back(x.bits);
  return bits;
}

// One head of 200 rows (13 slabs of 16, split among the threads) and a causal
// call of 3 heads of 130 rows (the heads split among them; FlexAttention's
// description takes 128 rows or more).
std::vector<attention_call> thread_test_calls(const model_choice& model) {
  attention_call one_head = call_of(1, 200), three_heads = call_of(3, 130);
  three_heads.shape.causal = true;
  one_head.model = three_heads.model = model;
  return {one_head, three_heads};
}

}  // namespace

TEST_CASE("threads: every preset's O and L are the same bits on 2, 3 threads and one per core as on 1 "
          "(1,035,450 elements compared)") {
  std::size_t compared = 0;
  for (const preset& p : presets()) {
    // bf16 operands: the fp8 kernels' threads are test_attention_fp8.cpp's.
    if (p.description && is_fp8(p.description().arithmetic.inputs)) continue;
    for (const attention_call& call : thread_test_calls(model_choice(p))) {
      const std::vector<std::uint64_t> one_thread = forward_bits(call, 1);
      for (const int threads : {2, 3, 0}) {
        CAPTURE(p.name);
        CAPTURE(threads);
        CHECK(forward_bits(call, threads) == one_thread);
        compared += one_thread.size();
      }
    }
  }
  CHECK(compared == 1'035'450);
}

TEST_CASE("threads: the flash backward's dQ, dK, dV and delta are the same bits on 2, 3 threads and one per core as "
          "on 1 (526,890 elements compared)") {
  // One head of 520 keys of a call of 66 heads: 5 key blocks dealt to 2 dQ buffers, each buffer's blocks in
  // ascending order whichever thread takes it; and the three causal heads, split among the threads.
  attention_call two_buffers = call_of(1, 520);
  two_buffers.batch_heads = std::pair{1, 66};
  CHECK(backward_kernel(resolve_call(two_buffers)).dq_splits == 2);
  std::size_t compared = 0;
  for (const attention_call& call : {two_buffers, thread_test_calls(model_choice())[1]}) {
    const std::vector<std::uint64_t> one_thread = backward_bits(call, 1);
    for (const int threads : {2, 3, 0}) {
      CAPTURE(threads);
      CHECK(backward_bits(call, threads) == one_thread);
      compared += one_thread.size();
    }
  }
  CHECK(compared == 526'890);
}

TEST_CASE("call: a refusal spells its option as the front end passes it") {
  attention_call call = call_of(1, 64);
  call.batch_heads = std::pair{1, 0};
  try {
    resolve_call(call);
    FAIL("resolved");
  } catch (const call_error& error) {
    CHECK(std::string(error.what()).rfind("batch_heads 1,0 is 0 heads, but Q holds 1", 0) == 0);
    CHECK(error.message("--batch-heads").rfind("--batch-heads 1,0 is 0 heads", 0) == 0);
  }
  // Every option has one name; the table follows the enum.
  CHECK(name_of(call_option::scale) == "scale");
  CHECK(name_of(call_option::causal) == "causal");
}

TEST_CASE("call: a tensor core that takes no bf16 factors is refused for attention") {
  attention_call call = call_of(1, 64);
  kernel_description d = pytorch_sdpa_flash_sm90_description();
  d.arithmetic.tensor_core = sm90_tensor_core_fp8;
  call.model = model_choice(d);
  CHECK_THROWS_WITH_AS(resolve_call(call),
                       "kernel pytorch_sdpa_flash_sm90's tensor core sm90_fp8 takes e4m3, e5m2 factors; its "
                       "Q K^T and P V take bf16",
                       std::invalid_argument);
}

TEST_CASE("call: a GPU without the kernel's tensor core is refused") {
  attention_call call = call_of(1, 64);
  kernel_description d = pytorch_sdpa_flash_sm90_description();
  d.arithmetic.tensor_core = sm80_tensor_core;
  call.model = model_choice(d);
  try {
    resolve_call(call);
    FAIL("resolved");
  } catch (const call_error& error) {
    CHECK(error.option() == call_option::gpu);
    CHECK(std::string(error.what()) ==
          "gpu h100_sxm (sm_90) has no sm80 tensor core, which kernel pytorch_sdpa_flash_sm90 computes with");
  }
}
