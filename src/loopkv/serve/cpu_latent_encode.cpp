// LLA's encode at serving time (cache/lla.py `_latents`): a layer's new tokens' pre-RoPE K and V of
// every loop -> their latents c = (x - mu) W_down, both kinds in one call. The same ATen operations
// as the Python path, in the same order (so the same values, bit for bit), called from C++: at the
// embedded default a decode step's encode is ~25 small operations, and from Python each one's
// dispatch costs more than its arithmetic.
#include <torch/extension.h>

#include <vector>

namespace {

// loops: T tensors (B, H, L, d_head); mu (G, W), down (G, W, r) of the layer's groups; order: the
// permutation of (batch, head, token, loop, dim) that puts the groups first, then batch and token,
// then the codec's concatenated axes. -> (B, G, L, r), the store's layout.
at::Tensor encode_one(const std::vector<at::Tensor>& loops, const at::Tensor& mu, const at::Tensor& down,
                      at::IntArrayRef order) {
  TORCH_CHECK_VALUE(!loops.empty() && mu.dim() == 2 && down.dim() == 3 && mu.size(0) == down.size(0) &&
                        mu.size(1) == down.size(1),
                    "encode: T loop tensors, mu (G, W) and down (G, W, r) expected; got mu ", mu.sizes(),
                    ", down ", down.sizes());
  const auto x = at::stack(loops, 3);   // (B, H, L, T, d_head)
  const int64_t b = x.size(0), length = x.size(2);
  TORCH_CHECK_VALUE(x.numel() == down.size(0) * b * length * down.size(1), "encode: loops ", x.sizes(),
                    " do not make ", down.size(0), " groups of width ", down.size(1));
  const auto vectors = x.permute(order).reshape({down.size(0), b * length, -1});
  return at::bmm(vectors - mu.unsqueeze(1), down).unflatten(1, {b, length}).transpose(0, 1);
}

}  // namespace

std::vector<at::Tensor> encode_latents(std::vector<at::Tensor> k_loops, std::vector<at::Tensor> v_loops,
                                       at::Tensor mu_k, at::Tensor down_k, at::Tensor mu_v, at::Tensor down_v,
                                       std::vector<int64_t> order) {
  TORCH_CHECK_VALUE(order.size() == 5, "encode: order permutes the 5 axes (batch, head, token, loop, dim)");
  return {encode_one(k_loops, mu_k, down_k, order), encode_one(v_loops, mu_v, down_v, order)};
}
