// LLA's encode at serving time (cache/lla.py `_latents`): a layer's new tokens' pre-RoPE K and V of
// every loop -> their latents c = (x - mu) W_down, both kinds in one call. The same values as the
// Python path, bit for bit: x - mu is one float subtraction per element either way (here in one pass
// over the loops' tensors, where the Python path stacks, permutes, copies and subtracts), and the
// product is the same at::bmm on the same contiguous operands. At the embedded default a decode step's
// encode is a few kilobytes of arithmetic, so its time was the operations' dispatch and allocations.
#include <torch/extension.h>

#include <array>
#include <vector>

namespace {

// loops: T tensors (B, H, L, d_head), any strides; mu (G, W), down (G, W, r) of the layer's groups;
// order: the permutation of (batch, head, token, loop, dim) that puts the groups first, then batch and
// token, then the codec's concatenated axes. -> (B, G, L, r), the store's layout (a view).
at::Tensor encode_one(const std::vector<at::Tensor>& loops, const at::Tensor& mu, const at::Tensor& down,
                      at::IntArrayRef order) {
  TORCH_CHECK_VALUE(!loops.empty() && mu.dim() == 2 && down.dim() == 3 && mu.size(0) == down.size(0) &&
                        mu.size(1) == down.size(1),
                    "encode: T loop tensors, mu (G, W) and down (G, W, r) expected; got mu ", mu.sizes(),
                    ", down ", down.sizes());
  const auto& first = loops[0];
  TORCH_CHECK_VALUE(first.dim() == 4, "encode: loop tensors must be (B, H, L, d_head), got ", first.sizes());
  for (const auto& x : loops)
    TORCH_CHECK_VALUE(x.sizes() == first.sizes() && x.scalar_type() == first.scalar_type() &&
                          x.device() == first.device(),
                      "encode: every loop's tensor must match the first, got ", x.sizes(), " and ", first.sizes());
  TORCH_CHECK_VALUE(mu.scalar_type() == first.scalar_type() && down.scalar_type() == first.scalar_type(),
                    "encode: K/V and the codec must share a dtype");
  const int64_t b = first.size(0), length = first.size(2), t_loops = loops.size();
  // the stacked (B, H, L, T, d_head) tensor's sizes, and each axis' place in the permuted order
  const std::array<int64_t, 5> sizes{b, first.size(1), length, t_loops, first.size(3)};
  TORCH_CHECK_VALUE(b * sizes[1] * length * t_loops * sizes[4] == down.size(0) * b * length * down.size(1),
                    "encode: loops ", first.sizes(), " x ", t_loops, " do not make ", down.size(0),
                    " groups of width ", down.size(1));
  std::array<int64_t, 5> out_sizes{}, axis{};
  for (int k = 0; k < 5; ++k) axis[k] = order[k], out_sizes[k] = sizes[order[k]];
  const int64_t width = down.size(1);
  auto vectors = at::empty({down.size(0), b * length, width}, first.options());   // (x - mu), contiguous
  const auto mu_c = mu.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, first.scalar_type(), "encode_latents", [&] {
    std::vector<const scalar_t*> base(t_loops);
    for (int64_t t = 0; t < t_loops; ++t) base[t] = loops[t].data_ptr<scalar_t>();
    // a source element's offset along each stacked axis (the loop axis picks the tensor instead)
    const auto st = first.strides();
    const std::array<int64_t, 5> stride{st[0], st[1], st[2], 0, st[3]};
    const scalar_t* m = mu_c.data_ptr<scalar_t>();
    scalar_t* out = vectors.data_ptr<scalar_t>();
    const int64_t per_group = b * length * width;   // the output walks (groups..., batch, token, width...) in order
    // outer four axes by counter, the last one as a strided inner run
    const int64_t inner = out_sizes[4], inner_stride = stride[axis[4]];
    int64_t n = 0;
    for (int64_t i0 = 0; i0 < out_sizes[0]; ++i0)
      for (int64_t i1 = 0; i1 < out_sizes[1]; ++i1)
        for (int64_t i2 = 0; i2 < out_sizes[2]; ++i2)
          for (int64_t i3 = 0; i3 < out_sizes[3]; ++i3) {
            const std::array<int64_t, 4> i{i0, i1, i2, i3};
            int64_t offset = 0, loop = 0;
            for (int k = 0; k < 4; ++k) {
              offset += i[k] * stride[axis[k]];
              if (axis[k] == 3) loop = i[k];
            }
            const scalar_t* src = base[loop] + offset;
            const scalar_t* mean = m + (n / per_group) * width + n % width;
            for (int64_t j = 0; j < inner; ++j) {
              const scalar_t x = axis[4] == 3 ? base[j][offset] : src[j * inner_stride];   // loops innermost: a tensor each
              out[n + j] = x - mean[j];
            }
            n += inner;
          }
  });
  return at::bmm(vectors, down).unflatten(1, {b, length}).transpose(0, 1);
}

}  // namespace

std::vector<at::Tensor> encode_latents(std::vector<at::Tensor> k_loops, std::vector<at::Tensor> v_loops,
                                       at::Tensor mu_k, at::Tensor down_k, at::Tensor mu_v, at::Tensor down_v,
                                       std::vector<int64_t> order) {
  TORCH_CHECK_VALUE(order.size() == 5, "encode: order permutes the 5 axes (batch, head, token, loop, dim)");
  return {encode_one(k_loops, mu_k, down_k, order), encode_one(v_loops, mu_v, down_v, order)};
}
