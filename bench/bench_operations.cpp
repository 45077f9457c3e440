// Throughput of the bit-exact operations against the host's own float.
//
// Every benchmark walks arrays of pre-generated operands and performs one
// independent operation per element, so it measures throughput, not latency.
// Each result goes through benchmark::DoNotOptimize, which keeps the compiler
// from deleting or vectorising the loop, for the native baseline as much as for
// bitexact. items_processed makes Google Benchmark report operations per second.
//
// Two operand mixes:
//   normal  random signs and fractions, exponents within +-12 of the bias (for
//           e4m3 +-3), so additions see alignment shifts from 0 to beyond the
//           precision and products stay in range: the common case.
//   edge    half uniformly random bit patterns (overflow, underflow, every
//           exponent), half special values: zeros, subnormals, the smallest
//           normal, the largest finite, infinities, quiet and signaling NaNs.
//
// Whole buffers (add_each, mul_each: elementwise.hpp) write 4096 results to an
// output array per call and return the OR of their flags; the flags go through
// DoNotOptimize and the output array is declared read (ClobberMemory), so
// every element is computed and stored. Their native counterpart is the same
// loop over floats, out[i] = a[i] + b[i], which the compiler vectorises.
//
// Observer variants of the same operation (the cost of tracing when nobody listens):
//   no_observer      the default: every report is compiled out.
//   empty_observer   an observer type whose on() members do nothing; the events
//                    are built and the compiler must discard them.
//   detached_sink    an observer that forwards to a runtime sink through a
//                    pointer, left null, and says so through listening():
//                    tracing compiled in, no observer attached.
//   trace_recorder   the real recorder (include/bitexact/trace/trace.hpp), which also
//                    computes the exact value and error with Boost.Multiprecision:
//                    what a full trace costs, for scale.
#include <benchmark/benchmark.h>

#include <bitexact/host/elementwise.hpp>
#include <bitexact/core/operations.hpp>
#include <bitexact/trace/trace.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace bitexact;

// A runtime trace sink, as a tool that may or may not attach a recorder would hold.
// Outside the anonymous namespace: with no implementation in sight there, GCC
// (-O3 -march=native) proves every call through it undefined and assumes a
// sink is always attached.
struct event_sink {
  virtual ~event_sink() = default;
  virtual void on(const operation_event&) = 0;
  virtual void on(const operand_event&) = 0;
  virtual void on(const alignment_event&) = 0;
  virtual void on(const exact_event&) = 0;
  virtual void on(const normalization_event&) = 0;
  virtual void on(const rounding_event&) = 0;
  virtual void on(const special_event&) = 0;
  virtual void on(const result_event&) = 0;
};

namespace {

constexpr std::size_t operand_count = 4096;  // 2 x 16 KiB of fp32 operands: stays in L1/L2

enum class mix { normal, edge };

template <format F>
value<F> random_normal(std::mt19937_64& rng) {
  const int spread = F.bias() >= 12 ? 12 : (F.bias() >= 6 ? 3 : 1);
  std::uniform_int_distribution<int> exponent(F.bias() - spread, F.bias() + spread);
  const auto bits = rng();
  const std::uint32_t sign = bits & 1;
  std::uint32_t fraction = static_cast<std::uint32_t>(bits >> 1) & value<F>::fraction_mask();
  const auto biased = static_cast<std::uint32_t>(exponent(rng));
  // E4M3FN spends the all-ones fraction of its top exponent on NaN.
  if (!F.has_infinity() && biased == static_cast<std::uint32_t>(F.max_biased_exponent()) &&
      fraction == value<F>::fraction_mask())
    fraction = 0;
  return value<F>::from_bits((sign << (F.width() - 1)) | (biased << F.fraction_bits) | fraction);
}

template <format F>
value<F> random_edge(std::mt19937_64& rng) {
  const auto bits = rng();
  const bool sign = bits & 1;
  const auto fraction = static_cast<std::uint32_t>(bits >> 8) & value<F>::fraction_mask();
  switch ((bits >> 1) % 16) {
    case 0: return value<F>::zero(sign);
    case 1:
    case 2: return value<F>::from_bits((std::uint32_t{sign} << (F.width() - 1)) | (fraction ? fraction : 1));
    case 3: return value<F>::from_bits((std::uint32_t{sign} << (F.width() - 1)) | (1u << F.fraction_bits));
    case 4: return value<F>::max_finite(sign);
    case 5:
      if constexpr (F.has_infinity()) return value<F>::infinity(sign);
      else return value<F>::max_finite(sign);
    case 6: return value<F>::default_nan(sign);
    case 7:
      if constexpr (F.has_infinity())  // signaling: top fraction bit clear, some other bit set
        return value<F>::from_bits(value<F>::infinity(sign).bits | 1u);
      else return value<F>::default_nan(sign);
    default: return value<F>::from_bits(static_cast<std::uint32_t>(bits >> 32));
  }
}

template <format F>
std::vector<value<F>> operands(mix kind, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<value<F>> out(operand_count);
  for (auto& x : out) x = kind == mix::normal ? random_normal<F>(rng) : random_edge<F>(rng);
  return out;
}

template <class T>
std::vector<float> as_host(const std::vector<T>& xs) {
  std::vector<float> out;
  for (const auto x : xs) out.push_back(to_host(x));
  return out;
}

struct empty_observer {
  template <class Event>
  constexpr void on(const Event&) {}
};


struct detached_sink {
  event_sink* sink = nullptr;
  bool listening() const { return sink != nullptr; }  // see is_listening in observer.hpp
  template <class Event>
  void on(const Event& event) {
    if (sink) sink->on(event);
  }
};

static_assert(!listens_to_core_events<no_observer> && observer<empty_observer&> && observer<detached_sink&>);

// The environment is laundered through DoNotOptimize so that the compiler
// cannot specialise the operation for round-to-nearest-even: the rounding
// mode stays a run-time value, as it is for a real caller.
environment opaque_environment() {
  environment env;
  benchmark::DoNotOptimize(env);
  return env;
}

template <format A, format B, class Op>
void binary(benchmark::State& state, mix kind, Op op) {
  const auto xs = operands<A>(kind, 1);
  const auto ys = operands<B>(kind, 2);
  const environment env = opaque_environment();
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      auto r = op(xs[i], ys[i], env);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

template <format A, class Op>
void unary(benchmark::State& state, mix kind, Op op) {
  auto xs = operands<A>(kind, 3);
  if constexpr (A == fp32) {
    // sqrt of a negative number is an invalid-operation shortcut; measure roots.
    if (kind == mix::normal)
      for (auto& x : xs) x = x.abs();
  }
  const environment env = opaque_environment();
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      auto r = op(xs[i], env);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

void fma3(benchmark::State& state, mix kind, auto op) {
  const auto xs = operands<fp32>(kind, 4), ys = operands<fp32>(kind, 5), zs = operands<fp32>(kind, 6);
  const environment env = opaque_environment();
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      auto r = op(xs[i], ys[i], zs[i], env);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

// A whole buffer per call: out = a op b, elementwise.
template <format A, format B, format R, class Op>
void elementwise(benchmark::State& state, mix kind, rounding_mode mode, Op op) {
  const auto xs = operands<A>(kind, 1);
  const auto ys = operands<B>(kind, 2);
  std::vector<value<R>> out(operand_count);
  environment env = opaque_environment();
  env.rounding = mode;
  benchmark::DoNotOptimize(env);
  for (auto _ : state) {
    const flags raised = op(xs, ys, out, env);
    benchmark::DoNotOptimize(raised);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

void native_add_elementwise(benchmark::State& state, mix kind) {
  const auto xs = as_host(operands<fp32>(kind, 1));
  const auto ys = as_host(operands<fp32>(kind, 2));
  std::vector<float> out(operand_count);
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) out[i] = xs[i] + ys[i];
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

template <class Op>
void native_binary(benchmark::State& state, mix kind, Op op) {
  const auto xs = as_host(operands<fp32>(kind, 1));
  const auto ys = as_host(operands<fp32>(kind, 2));
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      float r = op(xs[i], ys[i]);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

void native_fma(benchmark::State& state, mix kind) {
  const auto xs = as_host(operands<fp32>(kind, 4)), ys = as_host(operands<fp32>(kind, 5)),
             zs = as_host(operands<fp32>(kind, 6));
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      float r = __builtin_fmaf(xs[i], ys[i], zs[i]);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

void native_sqrt(benchmark::State& state, mix kind) {
  auto xs = as_host(operands<fp32>(kind, 3));
  if (kind == mix::normal)
    for (auto& x : xs) x = __builtin_fabsf(x);
  for (auto _ : state) {
    for (std::size_t i = 0; i < operand_count; ++i) {
      float r = __builtin_sqrtf(xs[i]);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * operand_count));
}

const char* name_of(mix kind) { return kind == mix::normal ? "normal" : "edge"; }

template <class Fn>
void add_benchmark(const std::string& name, mix kind, Fn fn) {
  benchmark::RegisterBenchmark((name + "/" + name_of(kind)).c_str(), [=](benchmark::State& state) { fn(state, kind); });
}

// The three observer variants of one binary operation.
#define BITEXACT_OBSERVED_BINARY(label, A, B, call)                                                          \
  add_benchmark(label "/no_observer", kind, [](benchmark::State& s, mix k) {                              \
    binary<A, B>(s, k, [](auto x, auto y, const environment& env) { return call(x, y, env); });          \
  });                                                                                                       \
  add_benchmark(label "/empty_observer", kind, [](benchmark::State& s, mix k) {                           \
    binary<A, B>(s, k, [](auto x, auto y, const environment& env) {                                      \
      empty_observer obs;                                                                                   \
      return call(x, y, env, obs);                                                                          \
    });                                                                                                     \
  });                                                                                                       \
  add_benchmark(label "/detached_sink", kind, [](benchmark::State& s, mix k) {                            \
    binary<A, B>(s, k, [](auto x, auto y, const environment& env) {                                      \
      detached_sink obs;                                                                                    \
      benchmark::DoNotOptimize(obs.sink);                                                                   \
      return call(x, y, env, obs);                                                                          \
    });                                                                                                     \
  });                                                                                                       \
  add_benchmark(label "/trace_recorder", kind, [](benchmark::State& s, mix k) {                           \
    binary<A, B>(s, k, [](auto x, auto y, const environment& env) {                                      \
      trace_recorder recorder;                                                                              \
      auto r = call(x, y, env, recorder);                                                                   \
      benchmark::DoNotOptimize(recorder);                                                                   \
      return r;                                                                                             \
    });                                                                                                     \
  });

// The same for a whole-buffer operation: no observer, and tracing compiled in
// but not attached.
#define BITEXACT_OBSERVED_EACH(label, A, B, R, call)                                                   \
  add_benchmark(label "/no_observer", kind, [](benchmark::State& s, mix k) {                         \
    elementwise<A, B, R>(s, k, rounding_mode::nearest_even,                                            \
                         [](const auto& x, const auto& y, auto& out, const environment& env) {         \
                           return call(x, y, out, env);                                                \
                         });                                                                           \
  });                                                                                                  \
  add_benchmark(label "/detached_sink", kind, [](benchmark::State& s, mix k) {                       \
    elementwise<A, B, R>(s, k, rounding_mode::nearest_even,                                            \
                         [](const auto& x, const auto& y, auto& out, const environment& env) {         \
                           detached_sink obs;                                                          \
                           benchmark::DoNotOptimize(obs.sink);                                         \
                           return call(x, y, out, env, obs);                                           \
                         });                                                                           \
  });

void register_all() {
  for (const mix kind : {mix::normal, mix::edge}) {
    add_benchmark("native_float_add", kind,
                  [](benchmark::State& s, mix k) { native_binary(s, k, [](float x, float y) { return x + y; }); });
    add_benchmark("native_float_mul", kind,
                  [](benchmark::State& s, mix k) { native_binary(s, k, [](float x, float y) { return x * y; }); });
    add_benchmark("native_float_div", kind,
                  [](benchmark::State& s, mix k) { native_binary(s, k, [](float x, float y) { return x / y; }); });
    add_benchmark("native_float_fma", kind, native_fma);
    add_benchmark("native_float_sqrt", kind, native_sqrt);

    BITEXACT_OBSERVED_BINARY("fp32_add", fp32, fp32, bitexact::add)
    BITEXACT_OBSERVED_BINARY("fp32_mul", fp32, fp32, bitexact::mul)
    BITEXACT_OBSERVED_BINARY("bf16_add", bf16, bf16, bitexact::add)

    add_benchmark("fp32_fma", kind, [](benchmark::State& s, mix k) {
      fma3(s, k, [](auto x, auto y, auto z, const environment& env) { return bitexact::fma(x, y, z, env); });
    });
    add_benchmark("fp32_div", kind, [](benchmark::State& s, mix k) {
      binary<fp32, fp32>(s, k, [](auto x, auto y, const environment& env) { return bitexact::div(x, y, env); });
    });
    add_benchmark("fp32_sqrt", kind, [](benchmark::State& s, mix k) {
      unary<fp32>(s, k, [](auto x, const environment& env) { return bitexact::sqrt(x, env); });
    });
    add_benchmark("bf16_mul", kind, [](benchmark::State& s, mix k) {
      binary<bf16, bf16>(s, k, [](auto x, auto y, const environment& env) { return bitexact::mul(x, y, env); });
    });
    add_benchmark("fp16_add", kind, [](benchmark::State& s, mix k) {
      binary<fp16, fp16>(s, k, [](auto x, auto y, const environment& env) { return bitexact::add(x, y, env); });
    });
    add_benchmark("e4m3_mul", kind, [](benchmark::State& s, mix k) {
      binary<e4m3, e4m3>(s, k, [](auto x, auto y, const environment& env) { return bitexact::mul(x, y, env); });
    });
    add_benchmark("fp32_add_bf16", kind, [](benchmark::State& s, mix k) {
      binary<fp32, bf16>(s, k,
                         [](auto x, auto y, const environment& env) { return bitexact::add<fp32>(x, y, env); });
    });
    add_benchmark("native_float_add_each", kind, native_add_elementwise);
    BITEXACT_OBSERVED_EACH("fp32_add_each", fp32, fp32, fp32, bitexact::add_each)
    BITEXACT_OBSERVED_EACH("fp32_mul_each", fp32, fp32, fp32, bitexact::mul_each)
    BITEXACT_OBSERVED_EACH("bf16_add_each", bf16, bf16, bf16, bitexact::add_each)
    add_benchmark("bf16_mul_each", kind, [](benchmark::State& s, mix k) {
      elementwise<bf16, bf16, bf16>(s, k, rounding_mode::nearest_even,
                                    [](const auto& x, const auto& y, auto& out, const environment& env) {
                                      return bitexact::mul_each(x, y, out, env);
                                    });
    });
    add_benchmark("fp32_add_bf16_each", kind, [](benchmark::State& s, mix k) {
      elementwise<fp32, bf16, fp32>(s, k, rounding_mode::nearest_even,
                                    [](const auto& x, const auto& y, auto& out, const environment& env) {
                                      return bitexact::add_each<fp32>(x, y, out, env);
                                    });
    });
    // Modes other than nearest-even take the buffer one element at a time.
    add_benchmark("fp32_add_each_upward", kind, [](benchmark::State& s, mix k) {
      elementwise<fp32, fp32, fp32>(s, k, rounding_mode::upward,
                                    [](const auto& x, const auto& y, auto& out, const environment& env) {
                                      return bitexact::add_each(x, y, out, env);
                                    });
    });
    add_benchmark("fp32_to_bf16", kind, [](benchmark::State& s, mix k) {
      unary<fp32>(s, k, [](auto x, const environment& env) { return bitexact::convert<bf16>(x, env); });
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
