// Our flash-attention forward kernels (cuda/attention, their host API
// flash_call.h) as PyTorch operators, torch.ops.bitexact.*, loaded by
// bitexact/torch.py:
//
//   flash_forward(query, key, value, is_causal, scale, stabilize, beta, eps, structure) -> (O, L)
//   flash_forward_indicator(query, key, value, is_causal, scale, eps, structure) -> (O, L, p_bar_ones, max_repeated)
//   flash_forward_fp8(query, key, value, is_causal, scale, descale_q, descale_k, descale_v, scale_s, descale_s,
//                     scale_o, stabilize, beta, eps, indicator, pv_fp32_add, p_bar_sum)
//                     -> (O, L, p_bar_ones, max_repeated)
//                     (p_bar_ones and max_repeated empty unless indicator; pv_fp32_add: each K/V
//                     block's P V from +0, then one FADD into O; p_bar_sum, with it: l sums P-bar)
//   fp8_value_layout(value) -> V^T as the FP8 kernel reads it (uint8)
//
// flash_forward_fp8 is our FP8 kernel, forward only: e4m3 Q, K and V with
// per-tensor scales, O bf16; V is handed over as the kernel reads it (V^T,
// its keys permuted, fp8_value_layout: one pass over V a call, also an
// operator of its own).
//
// Their autograd is here too, in C++, so that a training step pays no Python
// for them: the backward of every variant is PyTorch's own flash backward
// (aten::_scaled_dot_product_flash_attention_backward) on the forward's O and
// L, the paper's fix changing the forward alone. A Meta kernel gives
// torch.compile and FakeTensor the outputs' shapes and strides.
//
// The kernels read the views a model hands to scaled_dot_product_attention
// as they are ([B, N, H, d] transposed to [B, H, N, d], slices of a packed
// QKV), so nothing is copied unless flash::layout_taken refuses a layout; O
// is laid out [B, N, H, d] in memory, as PyTorch's flash backend lays it out,
// so that the model's transpose back is free.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "../../cuda/attention/flash_call.h"

namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int structure_index(c10::string_view structure) {
  if (structure == "wgmma") return 0;
  if (structure == "fa2") return 1;
  TORCH_CHECK_VALUE(false, "bitexact: structure must be 'wgmma' or 'fa2', not '", std::string(structure), "'");
}

void check_tensor(const char* name, const Tensor& t) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kBFloat16 && t.dim() == 4 && t.stride(-1) == 1, "bitexact: ", name,
                    " must be a bf16 tensor [B, H, N, d] with a unit stride on d; got ", c10::toString(t.scalar_type()),
                    " of shape ", t.sizes(), " and strides ", t.strides());
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_tensor("query", q);
  check_tensor("key", k);
  check_tensor("value", v);
  TORCH_CHECK_VALUE(q.size(-1) == 64 || q.size(-1) == 128, "bitexact: head dim ", q.size(-1),
                    " (the kernels take 64 and 128)");
  TORCH_CHECK_VALUE(k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(3) == q.size(3) && k.size(1) >= 1 &&
                        q.size(1) % k.size(1) == 0,
                    "bitexact: key and value must be [B, H_kv, N_k, d] with the query's B and d and H_kv dividing its "
                    "H; got query ", q.sizes(), ", key ", k.sizes(), ", value ", v.sizes());
  TORCH_CHECK_VALUE(k.device() == q.device() && v.device() == q.device(),
                    "bitexact: query, key and value on one device");
}

// O in the memory order [B, N, H, d] seen as [B, H, N, d], and L [B, H, N] fp32.
std::tuple<Tensor, Tensor> outputs_for(const Tensor& q) {
  const auto B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3);
  return {at::empty({B, N, H, d}, q.options()).transpose(1, 2), at::empty({B, H, N}, q.options().dtype(at::kFloat))};
}

flash::call_strides strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// t itself when the kernels read its layout, else a dense copy (same values, so the same bits).
Tensor readable(const Tensor& t) {
  return flash::layout_taken(t.data_ptr(), strides_of(t), int(t.size(0)), int(t.size(1)), int(t.size(2)))
             ? t
             : t.clone(at::MemoryFormat::Contiguous);
}

// An e4m3 tensor as bytes, itself when the kernels read its layout, else a dense copy.
Tensor readable_fp8(const Tensor& t) {
  const Tensor bytes = t.view(at::kByte);
  return flash::layout_taken(bytes.data_ptr(), strides_of(bytes), int(t.size(0)), int(t.size(1)), int(t.size(2)), 1)
             ? bytes
             : bytes.contiguous();
}

// V [B, H_kv, N, d] as our FP8 kernel reads it (flash_call.h, fp8_value_layout):
// V^T [B, H_kv, d, fp8_key_columns(N)], its keys permuted, zero past N.
Tensor fp8_value_layout(const Tensor& value) {
  TORCH_CHECK_VALUE(value.scalar_type() == at::kFloat8_e4m3fn && value.dim() == 4 && value.stride(-1) == 1 &&
                        value.is_cuda(),
                    "bitexact: value must be a CUDA float8_e4m3fn tensor [B, H, N, d] with a unit stride on d; got ",
                    c10::toString(value.scalar_type()), " of shape ", value.sizes(), " on ", value.device());
  const int64_t B = value.size(0), H = value.size(1), N = value.size(2), d = value.size(3);
  const c10::cuda::CUDAGuard device(value.device());
  Tensor vt = at::empty({B, H, d, flash::fp8_key_columns(int(N))}, value.options().dtype(at::kByte));
  const int rc = flash::fp8_value_layout(value.data_ptr(), strides_of(value), int(B), int(H), int(N), int(d),
                                         vt.data_ptr(), at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK_VALUE(rc != 1, "bitexact: fp8_value_layout does not take value of shape ", value.sizes());
  TORCH_CHECK(rc == 0, "bitexact: the layout kernel's launch failed: ", cudaGetErrorString(cudaGetLastError()));
  return vt;
}

void launch_call(flash::call& c, c10::string_view structure, const Tensor& q) {
  const int which = structure_index(structure);
  const c10::cuda::CUDAGuard device(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const int rc = which == 0 ? flash::forward_wgmma(c, stream) : flash::forward_fa2(c, stream);
  // The reason is looked up only when there is one (the message's arguments are evaluated on failure).
  const auto reason = [&c] {
    const char* refusal = flash::call_refusal(c);
    return refusal ? refusal : "arguments refused";
  };
  TORCH_CHECK_VALUE(rc != 1, "bitexact: the kernels do not take this call: ", reason());
  TORCH_CHECK(rc == 0, "bitexact: the kernel's launch failed: ", cudaGetErrorString(cudaGetLastError()));
}

void launch(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& o, const Tensor& lse,
            bool is_causal, double scale, int64_t stabilize, double beta, double eps, c10::string_view structure,
            int32_t* p_bar_ones, int32_t* max_repeated) {
  TORCH_CHECK(query.is_cuda(), "bitexact: the kernels run on CUDA tensors; got ", query.device());
  const Tensor q = readable(query), k = readable(key), v = readable(value);
  flash::call c{q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr<float>(),
                int(q.size(0)), int(q.size(1)), int(k.size(1)), int(q.size(2)), int(k.size(2)), int(q.size(3)),
                strides_of(q), strides_of(k), strides_of(v), strides_of(o), is_causal, float(scale),
                int(stabilize), float(beta), float(eps), p_bar_ones, max_repeated};
  launch_call(c, structure, q);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> flash_forward_fp8_cuda(const Tensor& query, const Tensor& key,
                                                                  const Tensor& value, bool is_causal, double scale,
                                                                  double descale_q, double descale_k,
                                                                  double descale_v, double scale_s, double descale_s,
                                                                  double scale_o, int64_t stabilize, double beta,
                                                                  double eps, bool indicator, bool pv_fp32_add,
                                                                  bool p_bar_sum) {
  for (const auto& [name, t] : {std::pair{"query", &query}, std::pair{"key", &key}, std::pair{"value", &value}})
    TORCH_CHECK_VALUE(t->scalar_type() == at::kFloat8_e4m3fn && t->dim() == 4 && t->stride(-1) == 1, "bitexact: ",
                      name, " must be a float8_e4m3fn tensor [B, H, N, d] with a unit stride on d; got ",
                      c10::toString(t->scalar_type()), " of shape ", t->sizes(), " and strides ", t->strides());
  TORCH_CHECK_VALUE(query.size(-1) == 64 || query.size(-1) == 128, "bitexact: head dim ", query.size(-1),
                    " (the kernels take 64 and 128)");
  TORCH_CHECK_VALUE(key.sizes() == value.sizes() && key.size(0) == query.size(0) && key.size(3) == query.size(3) &&
                        query.size(1) % key.size(1) == 0,
                    "bitexact: key and value must be [B, H_kv, N_k, d] with the query's B and d and H_kv dividing "
                    "its H; got query ", query.sizes(), ", key ", key.sizes(), ", value ", value.sizes());
  TORCH_CHECK_VALUE(query.is_cuda() && key.device() == query.device() && value.device() == query.device(),
                    "bitexact: query, key and value on one CUDA device; got ", query.device());
  const c10::cuda::CUDAGuard device(query.device());
  const Tensor q = readable_fp8(query), k = readable_fp8(key), vt = fp8_value_layout(value);
  const auto B = query.size(0), H = query.size(1), N = query.size(2), d = query.size(3);
  const at::TensorOptions bf16 = query.options().dtype(at::kBFloat16);
  const Tensor o = at::empty({B, N, H, d}, bf16).transpose(1, 2), lse = at::empty({B, H, N}, bf16.dtype(at::kFloat));
  // The indicator's [B, H, N] counts, or two empty tensors.
  const Tensor p_bar_ones = at::empty(indicator ? lse.sizes() : at::IntArrayRef{0}, lse.options().dtype(at::kInt));
  const Tensor max_repeated = at::empty_like(p_bar_ones);
  const flash::fp8_scales scales{float(descale_q), float(descale_k), float(descale_v),
                                 float(descale_s), float(scale_s),   float(scale_o)};
  flash::call c{q.data_ptr(), k.data_ptr(), vt.data_ptr(), o.data_ptr(), lse.data_ptr<float>(),
                int(B), int(H), int(key.size(1)), int(N), int(key.size(2)), int(d),
                strides_of(q), strides_of(k), strides_of(vt), strides_of(o), is_causal, float(scale),
                int(stabilize), float(beta), float(eps),
                indicator ? p_bar_ones.data_ptr<int32_t>() : nullptr,
                indicator ? max_repeated.data_ptr<int32_t>() : nullptr, &scales, pv_fp32_add, p_bar_sum};
  launch_call(c, "wgmma", q);
  return {o, lse, p_bar_ones, max_repeated};
}

std::tuple<Tensor, Tensor> flash_forward_cuda(const Tensor& query, const Tensor& key, const Tensor& value,
                                              bool is_causal, double scale, int64_t stabilize, double beta,
                                              double eps, c10::string_view structure) {
  check_inputs(query, key, value);
  auto [o, lse] = outputs_for(query);
  launch(query, key, value, o, lse, is_causal, scale, stabilize, beta, eps, structure, nullptr, nullptr);
  return {o, lse};
}

// Tensors elsewhere than on a CUDA device: one line, where the dispatcher would list every backend.
std::tuple<Tensor, Tensor> flash_forward_elsewhere(const Tensor& query, const Tensor&, const Tensor&, bool, double,
                                                   int64_t, double, double, c10::string_view) {
  TORCH_CHECK_VALUE(false, "bitexact: the kernels run on CUDA tensors; got ", query.device());
}

std::tuple<Tensor, Tensor, Tensor, Tensor> flash_forward_indicator_elsewhere(const Tensor& query, const Tensor&,
                                                                             const Tensor&, bool, double, double,
                                                                             c10::string_view) {
  TORCH_CHECK_VALUE(false, "bitexact: the kernels run on CUDA tensors; got ", query.device());
}

std::tuple<Tensor, Tensor, Tensor, Tensor> flash_forward_fp8_elsewhere(const Tensor& query, const Tensor&,
                                                                       const Tensor&, bool, double, double, double,
                                                                       double, double, double, double, int64_t,
                                                                       double, double, bool, bool, bool) {
  TORCH_CHECK_VALUE(false, "bitexact: the kernels run on CUDA tensors; got ", query.device());
}

Tensor fp8_value_layout_elsewhere(const Tensor& value) {
  TORCH_CHECK_VALUE(false, "bitexact: the kernels run on CUDA tensors; got ", value.device());
}

std::tuple<Tensor, Tensor> flash_forward_meta(const Tensor& query, const Tensor& key, const Tensor& value, bool,
                                              double, int64_t, double, double, c10::string_view structure) {
  check_inputs(query, key, value);
  structure_index(structure);
  return outputs_for(query);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> flash_forward_indicator_cuda(const Tensor& query, const Tensor& key,
                                                                        const Tensor& value, bool is_causal,
                                                                        double scale, double eps,
                                                                        c10::string_view structure) {
  check_inputs(query, key, value);
  auto [o, lse] = outputs_for(query);
  Tensor p_bar_ones = at::empty(lse.sizes(), lse.options().dtype(at::kInt));
  Tensor max_repeated = at::empty_like(p_bar_ones);
  launch(query, key, value, o, lse, is_causal, scale, 0, 2.0, eps, structure, p_bar_ones.data_ptr<int32_t>(),
         max_repeated.data_ptr<int32_t>());
  return {o, lse, p_bar_ones, max_repeated};
}

class flash_attention : public torch::autograd::Function<flash_attention> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& query, const Tensor& key, const Tensor& value,
                               bool is_causal, double scale, int64_t stabilize, double beta, double eps,
                               c10::string_view structure) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("bitexact::flash_forward", "")
                               .typed<decltype(flash_forward_cuda)>();
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [o, lse] = op.call(query, key, value, is_causal, scale, stabilize, beta, eps, structure);
    ctx->save_for_backward({query, key, value, o, lse});
    // L's gradient is never used: no zeros made for it when it is undefined (backward tests O's).
    ctx->set_materialize_grads(false);
    ctx->saved_data["is_causal"] = is_causal;
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({lse});
    return {o, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor& grad_o = grads[0];
    if (!grad_o.defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4];
    // Dense, no dropout: no cumulative lengths and no RNG state (undefined
    // tensors, as the flash forward returns them); grouped K/V heads are the
    // flash backward's own (it sums each group's dK and dV).
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_backward(
        grad_o.stride(-1) == 1 ? grad_o : grad_o.contiguous(), q, k, v, o, lse, Tensor(), Tensor(), q.size(2),
        k.size(2), 0.0, ctx->saved_data["is_causal"].toBool(), Tensor(), Tensor(),
        ctx->saved_data["scale"].toDouble());
    return {dq, dk, dv, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> flash_forward_autograd(const Tensor& query, const Tensor& key, const Tensor& value,
                                                  bool is_causal, double scale, int64_t stabilize, double beta,
                                                  double eps, c10::string_view structure) {
  const variable_list out =
      flash_attention::apply(query, key, value, is_causal, scale, stabilize, beta, eps, structure);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY(bitexact, m) {
  m.def("flash_forward(Tensor query, Tensor key, Tensor value, bool is_causal, float scale, int stabilize=0, "
        "float beta=2.0, float eps=0.001, str structure='wgmma') -> (Tensor, Tensor)");
  m.def("flash_forward_indicator(Tensor query, Tensor key, Tensor value, bool is_causal, float scale, "
        "float eps=0.001, str structure='wgmma') -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("flash_forward_fp8(Tensor query, Tensor key, Tensor value, bool is_causal, float scale, "
        "float descale_q=1.0, float descale_k=1.0, float descale_v=1.0, float scale_s=256.0, "
        "float descale_s=0.00390625, float scale_o=1.0, int stabilize=0, float beta=2.0, float eps=0.001, "
        "bool indicator=False, bool pv_fp32_add=False, bool p_bar_sum=False) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("fp8_value_layout(Tensor value) -> Tensor");
}

TORCH_LIBRARY_IMPL(bitexact, CUDA, m) {
  m.impl("flash_forward", &flash_forward_cuda);
  m.impl("flash_forward_indicator", &flash_forward_indicator_cuda);
  m.impl("flash_forward_fp8", &flash_forward_fp8_cuda);
  m.impl("fp8_value_layout", &fp8_value_layout);
}

TORCH_LIBRARY_IMPL(bitexact, CPU, m) {
  m.impl("flash_forward", &flash_forward_elsewhere);
  m.impl("flash_forward_indicator", &flash_forward_indicator_elsewhere);
  m.impl("flash_forward_fp8", &flash_forward_fp8_elsewhere);
  m.impl("fp8_value_layout", &fp8_value_layout_elsewhere);
}

TORCH_LIBRARY_IMPL(bitexact, Meta, m) { m.impl("flash_forward", &flash_forward_meta); }

TORCH_LIBRARY_IMPL(bitexact, Autograd, m) { m.impl("flash_forward", &flash_forward_autograd); }
