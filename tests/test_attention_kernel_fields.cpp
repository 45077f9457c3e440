// A field is read or refused: every field of every GPU preset's description,
// changed to each other value it can take (and each optional field added or
// dropped), either changes the bits of O or L on one of a few probe calls, or
// the description is refused with a line naming the field. The presets cover
// both scale placements and both units of the running max, and bf16 and fp8
// inputs, fp8 in both recipes, cuDNN's and FA2's (an fp8 description runs each
// probe's operands as e4m3 or e5m2 bit patterns, times 64, with scales of
// Transformer Engine's recipe).
#include <doctest/doctest.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

// Softmax scales such that any two rules of scale_log2_from round c = scale
// log2(e) to different floats at one of them (no scale parts all three).
std::vector<double> scales_telling_the_rules_apart() {
  std::vector<double> scales;
  std::set<std::pair<int, int>> apart;
  const int rules = static_cast<int>(json_names::scale_log2_sources.size());
  for (int i = 0; i < 1000 && static_cast<int>(apart.size()) < rules * (rules - 1) / 2; ++i) {
    const double scale = 0.05 + 0.0137 * i;
    std::vector<std::uint32_t> c;
    kernel_description d = pytorch_sdpa_flash_sm90_description();
    for (const auto& [name, rule] : json_names::scale_log2_sources) {
      d.scale_log2_from = rule;
      c.push_back(resolve(d, {1, 1, 16, 16, 64, false}, {scale, default_gpu(), 1, {}}).scale_log2.bits);
    }
    bool useful = false;
    for (int a = 0; a < rules; ++a)
      for (int b = a + 1; b < rules; ++b)
        if (c[static_cast<std::size_t>(a)] != c[static_cast<std::size_t>(b)]) useful |= apart.insert({a, b}).second;
    if (useful) scales.push_back(scale);
  }
  REQUIRE(static_cast<int>(apart.size()) == rules * (rules - 1) / 2);
  return scales;
}

// Q, K and V of a probe hold x * 64 as fp8; P is stored times 448 and O times 8.
fp8_scales fp8_probe_scales() {
  fp8_scales s;
  s.descale_q = s.descale_k = s.descale_v = from_host(1.0f / 64);
  s.descale_s = from_host(1.0f / 448);
  s.scale_s = from_host(448.0f);
  s.scale_o = from_host(8.0f);
  return s;
}

// One call: its shape, scale, split count (FA2's split path only: 1 unless a
// probe of the split path, none for the heuristic's) and operands.
struct probe {
  std::string what;
  attention_shape shape;
  double scale = 0.1;
  std::optional<int> splits = 1;
  std::vector<bfloat16> q, k, v;
  fp8_scales fp8 = fp8_probe_scales();
  bool fp8_only = false;  // a probe of the fp8 recipe alone: bf16 descriptions skip it
};

bfloat16 bf16_of(float x) { return ptx::cvt_rn_bf16_f32(from_host(x)); }

// Normal operands of one head times `size`.
probe normal_probe(const std::string& what, int query_rows, int key_rows, int head_dim, bool causal, float size,
                   unsigned seed) {
  probe p;
  p.what = what;
  p.shape = {1, 1, query_rows, key_rows, head_dim, causal};
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal;
  const auto fill = [&](std::vector<bfloat16>& x, int rows) {
    for (int i = 0; i < rows * head_dim; ++i) x.push_back(bf16_of(normal(generator) * size));
  };
  fill(p.q, query_rows);
  fill(p.k, key_rows);
  fill(p.v, key_rows);
  return p;
}

// Every element at index i * stride (mod the size), for i < count, set to x.
void scatter(std::vector<bfloat16>& operand, int count, std::size_t stride, bfloat16 x) {
  for (int i = 0; i < count; ++i) operand[static_cast<std::size_t>(i) * stride % operand.size()] = x;
}

// Every query row alike and every key on one axis: row scores a * b_j, V's
// rows given, so that P and O are known exactly.
probe axis_probe(const std::string& what, int query_rows, int head_dim, float a, const std::vector<float>& b,
                 const std::vector<float>& v) {
  probe p;
  p.what = what;
  p.shape = {1, 1, query_rows, static_cast<int>(b.size()), head_dim, false};
  p.scale = 0.125;
  p.q.assign(static_cast<std::size_t>(query_rows * head_dim), bfloat16::zero());
  p.k.assign(b.size() * static_cast<std::size_t>(head_dim), bfloat16::zero());
  p.v.assign(b.size() * static_cast<std::size_t>(head_dim), bfloat16::zero());
  for (int r = 0; r < query_rows; ++r) p.q[static_cast<std::size_t>(r * head_dim)] = bf16_of(a);
  for (std::size_t j = 0; j < b.size(); ++j) {
    p.k[j * static_cast<std::size_t>(head_dim)] = bf16_of(b[j]);
    for (int c = 0; c < head_dim; ++c) p.v[j * static_cast<std::size_t>(head_dim) + static_cast<std::size_t>(c)] = bf16_of(v[j]);
  }
  return p;
}

// The probes, for one head dim. Beside plain and causal calls (fewer and
// more query rows than keys), each shows one thing a field decides:
std::vector<probe> probes(int head_dim) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  std::vector<probe> all;
  for (const double scale : scales_telling_the_rules_apart()) {
    all.push_back(normal_probe("plain 130 x 300, scale " + std::to_string(scale), 130, 300, head_dim, false, 1.0f, 1));
    all.back().scale = scale;
  }
  all.push_back(normal_probe("causal 130 x 300", 130, 300, head_dim, true, 1.0f, 2));
  all.push_back(normal_probe("causal 300 x 130", 300, 130, head_dim, true, 1.0f, 3));
  // 128 rows (min_query_rows); infinite values of V beyond the diagonal: a
  // thread block of more rows visits more fully masked blocks, P = 0 times inf.
  probe masked_inf = normal_probe("causal 128 x 512, V infinite past the diagonal", 128, 512, head_dim, true, 1.0f, 4);
  for (std::size_t key = 140; key < 512; key += 5) masked_inf.v[key * d + key % d] = bfloat16::infinity(key % 2 == 0);
  all.push_back(masked_inf);
  // Ties for the stabilized rule: K's rows repeat every 37 keys.
  probe ties = normal_probe("repeated keys", 130, 300, head_dim, false, 2.0f, 5);
  for (std::size_t key = 37; key < 300; ++key) std::copy_n(ties.k.begin() + static_cast<std::ptrdiff_t>(key % 37 * d), d,
                                                           ties.k.begin() + static_cast<std::ptrdiff_t>(key * d));
  all.push_back(ties);
  // Scores that overflow to +-inf and infinite values.
  probe huge = normal_probe("overflowing scores, infinite values", 160, 300, head_dim, true, 1.0f, 6);
  scatter(huge.q, 40, 7919, bf16_of(3e38f));
  scatter(huge.k, 40, 6007, bf16_of(3e38f));
  scatter(huge.v, 40, 4999, bfloat16::infinity());
  all.push_back(huge);
  // A row whose every score is -inf: the max subtracted while it is -inf.
  probe no_max = normal_probe("row 0's scores all -inf", 130, 300, head_dim, true, 1.0f, 7);
  for (std::size_t c = 0; c < d; ++c) no_max.q[c] = bfloat16::zero();
  no_max.q[0] = bf16_of(3e38f);
  for (std::size_t key = 0; key < 300; ++key) no_max.k[key * d] = bf16_of(-2.0f - static_cast<float>(key % 3));  // 3e38 times -2 or less: -inf
  all.push_back(no_max);
  // Subnormal scores: FTZ of the fp32 operations, with one key L = m (l = 1).
  all.push_back(normal_probe("subnormal scores", 130, 300, head_dim, false, 1e-20f, 8));
  all.push_back(normal_probe("subnormal scores, one key", 130, 1, head_dim, false, 1e-20f, 9));
  // A P of 2^-128 (exponent -128: ex2's FTZ) times V 1e30, the max's V 0: O about 3e-9 or 0.
  all.push_back(axis_probe("a subnormal P", 130, head_dim, 32.0f, {24.0f, 1.8125f}, {0.0f, 1e30f}));
  // O subnormal: a normalization that flushes it, or not.
  all.push_back(axis_probe("subnormal V", 130, head_dim, 1.0f, {1.0f, 1.0f, 1.0f}, {1e-39f, 1e-39f, 1e-39f}));
  // Three equal scores: l = 3, O = 3.01171875, O / 3 = 1 + 2^-8, a bf16 tie
  // that O * RN(1/3) rounds up and the division to even.
  all.push_back(axis_probe("three equal scores", 130, head_dim, 1.0f, {1.0f, 1.0f, 1.0f}, {0.51171875f, 1.0f, 1.5f}));
  all.push_back(normal_probe("one query row, the split heuristic's count", 1, 300, head_dim, false, 1.0f, 10));
  all.back().splits.reset();
  // The split kernel's thread block: with the diagonal one key right of
  // square, its causal range ends in another K/V block for some block_m.
  probe split = normal_probe("two splits, causal 512 x 513, V infinite past the diagonal", 512, 513, head_dim, true,
                             1.0f, 11);
  split.splits = 2;
  for (std::size_t key = 100; key < 513; key += 3) split.v[key * d + key % d] = bfloat16::infinity();
  all.push_back(split);
  probe split_no_max = no_max;
  split_no_max.what = "three splits, row 0's scores all -inf";
  split_no_max.shape.causal = false;
  split_no_max.splits = 3;
  all.push_back(split_no_max);
  // fp8: P stored times 2^-100 and scores spread wide, so that most P are subnormal and some
  // thread's block sum is all subnormal (the exponential's FTZ).
  probe tiny_p = normal_probe("fp8: scale_s 2^-100", 130, 300, head_dim, false, 1.0f, 12);
  tiny_p.fp8.scale_s = from_host(std::ldexp(1.0f, -100));
  tiny_p.scale = 8.0;
  tiny_p.fp8_only = true;
  all.push_back(tiny_p);
  // fp8: descales so large that row 0's scores are all -inf (the max subtracted while it is -inf).
  probe fp8_no_max = normal_probe("fp8: row 0's scores all -inf", 130, 300, head_dim, false, 1.0f, 13);
  for (std::size_t c = 0; c < d; ++c) fp8_no_max.q[c] = bfloat16::zero();
  fp8_no_max.q[0] = bf16_of(7.0f);  // 448 as fp8
  for (std::size_t key = 0; key < 300; ++key) fp8_no_max.k[key * d] = bf16_of(-7.0f);
  fp8_no_max.fp8.descale_q = from_host(1e30f);
  fp8_no_max.fp8.descale_k = from_host(1e5f);
  fp8_no_max.fp8_only = true;
  all.push_back(fp8_no_max);
  return all;
}

// What a description computes on a probe: O and L's bits, and each row's
// fp32 epilogue (O before its bf16 rounding, the row sum); or the refusal.
struct epilogue_bits {
  std::vector<std::uint32_t>* bits;
  void on(const row_end_event& e) {
    bits->push_back(e.sum.bits);
    for (const float32 x : e.o) bits->push_back(x.bits);
  }
};

// A probe's bf16 operand as fp8 bit patterns: x * 64, e4m3 satfinite (read as e5m2 by an e5m2 description),
// an infinity NaN (0x7F), e4m3 having none: V's NaN past the diagonal is what tells tiles apart.
std::vector<std::uint8_t> fp8_bits(const std::vector<bfloat16>& x) {
  std::vector<std::uint8_t> bits;
  for (const bfloat16 b : x)
    bits.push_back(b.is_inf() ? 0x7F
                              : ptx::cvt_rn_satfinite_e4m3_f32(
                                    ptx::mul_f32(float32::from_bits(std::uint32_t{b.bits} << 16), from_host(64.0f)))
                                    .bits);
  return bits;
}

std::vector<std::uint32_t> outcome(const kernel_description& d, const probe& p) {
  const bool fp8 = is_fp8(d.arithmetic.inputs);
  if (p.fp8_only && !fp8) return {};
  call_options call{p.scale, default_gpu(), {}, fp8 ? p.fp8 : fp8_scales{}};
  if (p.splits && d.split == split_policy::flash2_heuristic) call.splits = p.splits;
  flash_kernel kernel;
  try {
    kernel = resolve(d, p.shape, call);
  } catch (const std::invalid_argument&) {
    return {0xFFFFFFFFu};  // refused for this call (no tiles for its head dim, too few query rows)
  }
  const std::size_t rows = static_cast<std::size_t>(p.shape.query_rows);
  std::vector<bfloat16> o(p.q.size());
  std::vector<float32> lse(rows);
  std::vector<std::uint32_t> bits;
  if (fp8) {
    // O in the recipe's format: e4m3 (cuDNN's) or bf16 (FA2's).
    std::vector<float8_e4m3> o8(kernel.o_format == e4m3 ? p.q.size() : 0);
    const std::vector<std::uint8_t> q = fp8_bits(p.q), k = fp8_bits(p.k), v = fp8_bits(p.v);
    const std::span<const std::uint8_t> q8(q), k8(k), v8(v);
    if (kernel.o_format == e4m3)
      flash_forward_head(kernel, p.shape, q8, k8, v8, std::span<float8_e4m3>(o8), std::span<float32>(lse),
                         epilogue_bits{&bits});
    else
      flash_forward_head(kernel, p.shape, q8, k8, v8, std::span<bfloat16>(o), std::span<float32>(lse),
                         epilogue_bits{&bits});
    for (const float8_e4m3 x : o8) bits.push_back(x.bits);
    if (kernel.o_format != e4m3)
      for (const bfloat16 x : o) bits.push_back(x.bits);
    for (const float32 x : lse) bits.push_back(x.bits);
    return bits;
  }
  flash_forward_head(kernel, p.shape, p.q, p.k, p.v, o, lse, epilogue_bits{&bits});
  for (const bfloat16 x : o) bits.push_back(x.bits);
  for (const float32 x : lse) bits.push_back(x.bits);
  return bits;
}

// The JSON values a field may take other than `now` (none for a field that is not an arithmetic choice).
std::vector<nlohmann::json> other_values(const std::string& field, const nlohmann::json& now) {
  namespace names = json_names;
  std::vector<nlohmann::json> values;
  const auto names_of = [&](const auto& table) {
    for (const auto& [name, value] : table) values.emplace_back(std::string(name));
    values.emplace_back("not_a_value");
  };
  if (field == "split_kv") names_of(names::split_policies);
  if (field == "block_order") names_of(names::block_orders);
  if (field == "scale_placement") names_of(names::placements);
  if (field == "exponent") names_of(names::exponent_forms);
  if (field == "scale_log2_from") names_of(names::scale_log2_sources);
  if (field == "causal_alignment") names_of(names::causal_alignments);
  if (field == "max_units") names_of(names::units);
  if (field == "exponential") names_of(names::exponentials);
  if (field == "masked_max") names_of(names::masked_maxima);
  if (field == "row_sum") names_of(names::row_sums);
  if (field == "rescale") names_of(names::rescales);
  if (field == "p_rounding" || field == "o_rounding") names_of(names::conversions);
  if (field == "inputs") names_of(names::input_formats);
  if (field == "p_scale") names_of(names::p_scalings);
  if (field == "pv_accumulation") names_of(names::pv_accumulations);
  if (field == "normalization") names_of(names::normalizations);
  if (field == "lse_formula") names_of(names::lse_formulas);
  if (field == "lse_units") names_of(names::lse_units);
  if (field == "tensor_core")
    for (const std::string_view name : {"sm90", "sm90_k8", "sm80", "sm90_fp8"}) values.emplace_back(std::string(name));
  if (field == "min_query_rows") values = {1, 2, 129};
  if (field == "mask_block") values = {64, 128, 256};
  if (field == "log2_e") values = {1.4426950408889634, 1.4427, 2.0};
  if (field == "alu_ftz") values = {true, false};
  if (field == "beta") values = {1.5, 2.0, 3.0};
  if (field == "epsilon") values = {0.0, 0.001, 0.5};
  if (field == "across_blocks") values = {true, false};
  // 512: a thread block taller than cuDNN's 256-key blocks visits a block that 16 to 256 never do.
  if (field == "block_m" || field == "block_n") values = {16, 32, 64, 128, 256, 512};
  // Numbers are read as floats: a value that rounds to the same float is no change.
  std::erase_if(values, [&](const nlohmann::json& x) {
    return x == now || (x.is_number() && now.is_number() &&
                        static_cast<float>(x.get<double>()) == static_cast<float>(now.get<double>()));
  });
  return values;
}

// A description one change away from a preset's: `field` names what
// changed ("tiles.64.block_m"). A name or a switch must change the bits at
// each of its other values; a number (a tile size, a count, a constant) at
// one of them at least, as some values are equivalent (a block_m dividing
// block_n visits the same blocks under a top-left causal mask).
struct variant {
  std::string change;
  std::string field;
  bool every_value = true;
  nlohmann::json json;
};

bool is_number_field(const std::string& name) {
  for (const char* number : {"block_m", "block_n", "mask_block", "min_query_rows", "log2_e", "beta", "epsilon"})
    if (name.ends_with(number)) return true;
  return false;
}

// Every description one change away from `base`: each field (tiles and
// stabilize field by field) to each other value, and each optional field
// added or dropped.
std::vector<variant> variants(const nlohmann::json& base) {
  std::vector<variant> out;
  const auto change = [&](const std::string& what, auto&& edit) {
    nlohmann::json j = base;
    edit(j);
    const std::string field = what.substr(0, what.find(' '));
    out.push_back({what, field, !is_number_field(field), j});
  };
  for (const auto& [field, value] : base.items()) {
    if (field == "name" || field == "summary") continue;  // labels, not arithmetic
    if (field == "tiles" || field == "split_tiles") {
      for (const auto& [dim, tile] : value.items())
        for (const std::string side : {"block_m", "block_n"})
          for (const nlohmann::json& other : other_values(side, tile[side]))
            change(field + "." + dim + "." + side + " " + other.dump(), [&](nlohmann::json& j) { j[field][dim][side] = other; });
      continue;
    }
    if (field == "stabilize") {
      for (const auto& [part, part_value] : value.items())
        for (const nlohmann::json& other : other_values(part, part_value))
          change("stabilize." + part + " " + other.dump(), [&](nlohmann::json& j) { j[field][part] = other; });
      change("stabilize dropped", [&](nlohmann::json& j) { j.erase(field); });
      continue;
    }
    for (const nlohmann::json& other : other_values(field, value))
      change(field + " " + other.dump(), [&](nlohmann::json& j) { j[field] = other; });
  }
  // Optional fields, and fields read only with other values, added.
  const std::vector<std::pair<std::string, nlohmann::json>> additions{
      {"min_query_rows", 64},
      {"mask_block", 128},
      {"log2_e", 1.4427},
      {"alu_ftz", true},
      {"split_tiles", {{"64", {{"block_m", 64}, {"block_n", 256}}}, {"128", {{"block_m", 64}, {"block_n", 128}}}}},
      {"stabilize", {{"beta", 2.0}, {"epsilon", 0.5}, {"across_blocks", false}}},
      {"exponent", "fma"},
      {"scale_log2_from", "double_scale"},
      {"inputs", "e4m3"},
      {"p_scale", "lg2_offset"},
      {"pv_accumulation", "fp32_add"},
      {"o_rounding", "cvt.rn.satfinite.e4m3x2.f32"}};
  for (const auto& [field, value] : additions)
    if (!base.contains(field)) change(field + " added", [&](nlohmann::json& j) { j[field] = value; });
  return out;
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("kernel descriptions: every field of every preset changes the bits on a probe or is refused, naming it") {
    const std::vector<probe> d64 = probes(64), d128 = probes(128);
    int presets_seen = 0, changes = 0, refused = 0, changed_bits = 0, same_bits = 0;
    for (const preset& p : presets()) {
      if (p.description == nullptr) continue;
      ++presets_seen;
      const kernel_description original = p.description();
      std::vector<std::vector<std::uint32_t>> original_bits;
      for (const auto* set : {&d64, &d128})
        for (const probe& probe : *set) original_bits.push_back(outcome(original, probe));
      // Per number field: whether some value changed the bits, and the values that did not.
      std::map<std::string, std::pair<bool, std::string>> numbers;
      for (const variant& v : variants(kernel_to_json(original))) {
        ++changes;
        std::optional<kernel_description> changed;
        std::string refusal;
        try {
          changed = kernel_from_json(v.json.dump());
        } catch (const std::invalid_argument& e) {
          refusal = e.what();
        }
        if (!changed) {
          ++refused;
          const std::string field = v.field.substr(0, v.field.find('.'));
          CHECK_MESSAGE(refusal.find(field) != std::string::npos,
                        p.name << " with " << v.change << " is refused without naming " << field << ": " << refusal);
          continue;
        }
        bool differs = false;
        std::size_t index = 0;
        for (const auto* set : {&d64, &d128})
          for (const probe& probe : *set) differs = differs || outcome(*changed, probe) != original_bits[index++];
        (differs ? changed_bits : same_bits) += 1;
        if (v.every_value) {
          CHECK_MESSAGE(differs, p.name << " with " << v.change << " is accepted and changes no bit");
        } else {
          auto& [some_differ, unchanged] = numbers[v.field];
          some_differ = some_differ || differs;
          if (!differs) unchanged += " " + v.change.substr(v.field.size() + 1);
        }
      }
      for (const auto& [field, result] : numbers)
        CHECK_MESSAGE(result.first, p.name << ": no value of " << field << " changes a bit (tried" << result.second << ")");
    }
    MESSAGE(presets_seen << " presets, " << d64.size() + d128.size() << " probe calls, " << changes << " changes: "
                         << refused << " refused, " << changed_bits
                         << " changed the bits, " << same_bits << " values of numbers equivalent to the preset's");
    CHECK(presets_seen == 12);
    CHECK(changes == refused + changed_bits + same_bits);
    CHECK(changed_bits > refused / 2);  // the probes see most changes, not a few
  }
}
