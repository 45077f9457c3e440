// What the attention models share: the shape of one call, the event that
// counts a head's finished rows, and the parameters of the paper's stabilized
// softmax.
#pragma once

#include "../core/format.hpp"

namespace bitexact::attention {

// One attention call as PyTorch's scaled_dot_product_attention takes it:
// Q [batch, heads, query_rows, head_dim], K and V [batch, heads, key_rows, head_dim].
struct attention_shape {
  int batch = 1;
  int heads = 1;
  int query_rows = 0;
  int key_rows = 0;
  int head_dim = 0;
  bool causal = false;  // the kernel aligns the diagonal (flash_kernel::causal); bottom-right in the paper's model
};

// Rows of one head's results written: query rows [first, first + count) of O
// and L in a forward pass, key rows of dK and dV in the backward. Unlike every
// other event of the attention models it comes from whichever thread computed
// the rows, as they finish, in no order, so that counting progress does not
// hold a head to one thread: an observer of it must take reports from several
// threads at once.
struct rows_done_event {
  int first = 0;
  int count = 0;
};

// The paper's stabilized softmax (Qiu & Yao, Algorithm 3): per K/V block,
// rm = the block's row max and rs = how many of its scores lie within epsilon
// of it; when rs > 1 the block's max becomes beta * rm for rm > 0 and 0 for
// rm < 0, before it is merged with the running max. No P is then exactly 1 in
// a block with a repeated maximum; a maximum repeated across blocks, or a
// maximum of 0, is left alone (the rule sees one block at a time). Each model
// applies it on its own arithmetic: flash_forward.hpp on the kernel's raw fp32
// scores (RN(beta * rm), and "within" measured as the softmax sees them,
// RN(RN(rm - S) * scale) <= epsilon, scale in natural-log units, as the
// paper's code compares scaled scores); paper_reference.hpp on the paper's
// code's bf16 scaled scores (A >= bf16(rm - epsilon), bf16(beta * rm)).
//
// across_blocks (ours, the GPU-kernel model only): the rule applied to the
// row's largest score so far, over every K/V block processed up to and
// including the current one, so that a maximum repeated in two blocks is
// caught when the second is reached (its first occurrence, already
// multiplied by P = 1, is not undone). It needs a positive finite scale and
// a finite epsilon: "two or more scores within epsilon of the max" is then
// "the second largest score is", which is what both the model and the kernel
// keep (two numbers a row instead of every score).
struct stabilized_max {
  float32 beta = from_host(2.0f);
  float32 epsilon = from_host(1e-3f);
  bool across_blocks = false;
};

}  // namespace bitexact::attention
