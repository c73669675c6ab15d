"""The codec of decoupled-RoPE LLA (LLA Appendix J / Table 14), per (layer, KV head) as LLA's.

Each head's dims split (models/rope.rope_dims): d_rope dims of the highest-frequency pairs keep
RoPE, the other d_c = d_head - d_rope ("content") carry no position in the decoupled model. Per token:

    K content  c_k = (x_c - mu_k) W_down,k     x_c = [k_1,C .. k_T,C]  width T*d_c, rank r_k
    K rotated  k_R = sum_t m_t k_t,R           one slice for all loops (learned mix m, init 1/T),
                                               stored rotated to the token's position
    V          c_v = (x - mu_v) W_down,v       as LLA: width T*d_head, rank r_v

Loop t reads K_C = c_k W_up,k,t^T + mu_k,t (no rotation), K_R = R(p) k_R, V = c_v W_up,v,t^T + mu_v,t.
With no rotation on K_C, its decoder folds into the query (q_C . K_C = (W_up,k,t^T q_C) . c_k +
q_C . mu_k,t): scores and values are computed in latent space (kernels/absorbed_attention.py).
An optional query adapter (one d_c x d_c map per layer and query head, identity at init) lets the
queries' content part adapt to the position-free keys; it is trained with the codec.

Bytes per token per (layer, head): (r_k + d_rope + r_v) values.
"""
from __future__ import annotations

import torch
from torch import nn

from loopkv.models.rope import rope_dims

KINDS = ("k", "v")


class DecoupledCodec(nn.Module):
    groups = ("layer", "head")
    INITS = ("svd",)

    def __init__(self, sizes: dict[str, int], ranks: dict[str, int], d_rope: int, rope_style: str = "rotate_half",
                 query_heads: int | None = None, query_adapter: bool = False):
        super().__init__()
        self.sizes = dict(sizes)
        loops, dim = sizes["loop"], sizes["dim"]
        rope_idx, content_idx = rope_dims(dim, d_rope, rope_style)
        # buffers, so they live on the codec's device (an index on the host would be copied over at every read)
        self.register_buffer("rope_idx", rope_idx, persistent=False)
        self.register_buffer("content_idx", content_idx, persistent=False)
        self.d_rope, self.d_content = d_rope, dim - d_rope
        if self.d_content < 1:
            raise ValueError(f"d_rope {d_rope} leaves no content dims of d_head {dim}")
        self.num_groups = sizes["layer"] * sizes["head"]
        self.widths = {"k": loops * self.d_content, "v": loops * dim}
        self.ranks = dict(ranks)
        self.query_adapter = query_adapter
        for kind in KINDS:
            r, width = ranks[kind], self.widths[kind]
            if not 1 <= r <= width:
                raise ValueError(f"rank_{kind} must be in [1, {width}], got {r}")
            self.register_parameter(f"mu_{kind}", nn.Parameter(torch.zeros(self.num_groups, width)))
            self.register_parameter(f"down_{kind}", nn.Parameter(torch.zeros(self.num_groups, width, r)))
            self.register_parameter(f"up_{kind}", nn.Parameter(torch.zeros(self.num_groups, width, r)))
        self.rope_mix = nn.Parameter(torch.full((self.num_groups, loops), 1.0 / loops))
        if query_adapter:
            heads = query_heads or sizes["head"]
            eye = torch.eye(self.d_content).expand(sizes["layer"] * heads, -1, -1).clone()
            self.adapter = nn.Parameter(eye)     # (D * H_q, d_c, d_c): q_C <- q_C A

    def params(self, kind: str):
        return getattr(self, f"mu_{kind}"), getattr(self, f"down_{kind}"), getattr(self, f"up_{kind}")

    def loop_rows(self, kind: str, loop: int) -> torch.Tensor:
        """The rows of the width that belong to `loop` (W_up,t's rows)."""
        per_loop = self.widths[kind] // self.sizes["loop"]
        return torch.arange(loop * per_loop, (loop + 1) * per_loop, device=self.rope_mix.device)

    def vectors(self, kind: str, loops: torch.Tensor) -> torch.Tensor:
        """A token's pre-RoPE K or V of every loop (..., T, d_head) -> the codec's vector (..., width):
        K's content dims, V whole, loops concatenated."""
        x = loops[..., self.content_idx] if kind == "k" else loops
        return x.flatten(-2)

    def encode(self, kind: str, vec: torch.Tensor, groups: slice) -> torch.Tensor:
        """(..., G, width) -> (..., G, r)."""
        mu, down, _ = self.params(kind)
        return torch.einsum("...gx,gxr->...gr", vec - mu[groups], down[groups])

    def decode(self, kind: str, latent: torch.Tensor, groups: slice, loop: int) -> torch.Tensor:
        """(..., G, r) -> loop's (..., G, d_c) (K content) or (..., G, d_head) (V)."""
        mu, _, up = self.params(kind)
        rows = self.loop_rows(kind, loop)
        return torch.einsum("...gr,gxr->...gx", latent, up[groups][:, rows]) + mu[groups][:, rows]

    def rope_slice(self, k_loops: torch.Tensor, groups: slice) -> torch.Tensor:
        """(..., G, T, d_head) pre-RoPE K of every loop -> the loops' mixed rotated dims (..., G, d_rope)."""
        x = k_loops[..., self.rope_idx]
        return torch.einsum("...gtd,gt->...gd", x, self.rope_mix[groups].to(x.dtype))

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        element = torch.tensor([], dtype=dtype).element_size()
        return self.num_groups * (self.ranks["k"] + self.d_rope + self.ranks["v"]) * element

    @torch.no_grad()
    def initialise(self, init: str, mean: dict[str, torch.Tensor], covariance: dict[str, torch.Tensor],
                   seed: int = 0) -> None:
        """SVD initialisation from LLA's per-head moments (mean (G, T*d_head), covariance
        (G, T*d_head, T*d_head), loops outer, dims inner): K from the moments of its content dims
        (their rows and columns of every loop), V as LLA; the rope mix 1/T; the adapter the identity."""
        if init not in self.INITS:
            raise ValueError(f"the decoupled codec initialises from {self.INITS}, got {init!r}")
        dim = self.sizes["dim"]
        content_rows = torch.cat([t * dim + self.content_idx.cpu() for t in range(self.sizes["loop"])])
        picked = {"k": (mean["k"][:, content_rows], covariance["k"][:, content_rows][:, :, content_rows]),
                  "v": (mean["v"], covariance["v"])}
        for kind in KINDS:
            mu, down, up = self.params(kind)
            m, cov = picked[kind]
            top = torch.linalg.eigh(cov.double())[1].flip(-1)[..., : self.ranks[kind]]   # descending
            mu.copy_(m.to(mu.dtype))
            down.copy_(top.to(down.dtype))
            up.copy_(top.to(up.dtype))
        self.rope_mix.fill_(1.0 / self.sizes["loop"])
        if self.query_adapter:
            self.adapter.copy_(torch.eye(self.d_content).expand_as(self.adapter))
