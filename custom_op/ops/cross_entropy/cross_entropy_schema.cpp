// Schemas of cross_entropy: per-row softmax cross-entropy with integer labels,
// loss[i] = logsumexp(logits[i]) - logits[i, labels[i]], 0 where labels[i] is
// ignore_index. A schema `int` arrives in C++ as an int64_t.
#include "common/library.h"

CUSTOM_OP_FRAGMENT(m) {
  // The public operator has no C++ kernel: Python registers a
  // CompositeImplicitAutograd kernel that calls cross_entropy_forward and
  // returns the loss, so autograd sees cross_entropy_forward and
  // cross_entropy_backward.
  m.def(
      "cross_entropy(Tensor logits, Tensor labels, int ignore_index=-100)"
      " -> Tensor");
  // Returns (loss, lse): lse = logsumexp(logits, 1), saved for the backward;
  // both [N] in float32 (float64 for float64 logits).
  m.def(
      "cross_entropy_forward(Tensor logits, Tensor labels,"
      " int ignore_index=-100) -> (Tensor, Tensor)");
  // Returns grad_logits = grad[:, None] * (softmax(logits) - onehot(labels)),
  // in logits' dtype, 0 on rows whose label is ignore_index.
  m.def(
      "cross_entropy_backward(Tensor grad, Tensor logits, Tensor labels,"
      " Tensor lse, int ignore_index) -> Tensor");
}
