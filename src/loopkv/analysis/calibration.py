"""Calibration: the teacher's pre-RoPE K and V for every loop, layer and head, on calibration prompts.

Two products, because paper scale cannot keep raw activations (Ouro-1.4B: 393k values per token):
- streaming moments per (K|V, layer, head) of the cross-loop vector x = [x_1; ...; x_T] (width
  T*d_head): count, sum and sum of outer products in float64. The LLA SVD initialisation needs
  exactly these (mean and centred covariance);
- a seeded random sample of whole tokens, (K|V, n, D, H, T, d_head), for the per-axis spectra,
  variance decomposition and convergence diagnostics.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from loopkv.cache.capture import CaptureCache


@torch.no_grad()
def capture_kv(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
    """Pre-RoPE (K, V) of every token, each of shape (B, L, D, H, T, d_head), in float32."""
    config = model.config
    T, D = config.total_ut_steps, config.num_hidden_layers
    keys, values = {}, {}

    def sink(loop, layer, k, v):
        keys[loop, layer], values[loop, layer] = k.float(), v.float()

    model(input_ids, attention_mask=attention_mask, cache=CaptureCache(config, sink), use_cache=False)

    def assemble(store):
        # store[t, d]: (B, H, L, dh) -> (B, D, H, L, T, dh) -> (B, L, D, H, T, dh)
        per_layer = [torch.stack([store[t, d] for t in range(T)], dim=-2) for d in range(D)]
        return torch.stack(per_layer, dim=1).permute(0, 3, 1, 2, 4, 5).contiguous()

    return assemble(keys), assemble(values)


@dataclass
class CalibrationStats:
    """Moments of x (width T*d_head) per (kind, layer, head); kind 0 = K, 1 = V."""

    num_layers: int
    num_heads: int
    num_loops: int
    head_dim: int
    count: int = 0
    total: torch.Tensor | None = None   # (2, D, H, T*dh) float64
    outer: torch.Tensor | None = None   # (2, D, H, T*dh, T*dh) float64
    samples: list[torch.Tensor] = field(default_factory=list)  # each (2, n, D, H, T, dh)

    def add(self, k: torch.Tensor, v: torch.Tensor, sample: torch.Tensor | None = None) -> None:
        """k, v: (N, D, H, T, dh) for N tokens; `sample`: indices of tokens to keep raw."""
        width = self.num_loops * self.head_dim
        x = torch.stack([k, v]).double().flatten(-2)                      # (2, N, D, H, T*dh)
        x = x.permute(0, 2, 3, 1, 4)                                        # (2, D, H, N, T*dh)
        if self.total is None:
            self.total = torch.zeros(2, self.num_layers, self.num_heads, width, dtype=torch.float64)
            self.outer = torch.zeros(2, self.num_layers, self.num_heads, width, width, dtype=torch.float64)
        self.total += x.sum(dim=3)
        self.outer += x.transpose(-1, -2) @ x
        self.count += k.shape[0]
        if sample is not None and len(sample):
            self.samples.append(torch.stack([k[sample], v[sample]]).to(torch.float16))

    def mean(self) -> torch.Tensor:
        return self.total / self.count

    def covariance(self) -> torch.Tensor:
        """Centred scatter matrix divided by the count: (2, D, H, T*dh, T*dh)."""
        mu = self.mean()
        return self.outer / self.count - mu[..., :, None] * mu[..., None, :]

    def sample_tensor(self) -> torch.Tensor:
        return torch.cat(self.samples, dim=1) if self.samples else torch.empty(0)

    def state(self) -> dict:
        return {"num_layers": self.num_layers, "num_heads": self.num_heads, "num_loops": self.num_loops,
                "head_dim": self.head_dim, "count": self.count, "total": self.total, "outer": self.outer,
                "samples": self.sample_tensor()}

    @classmethod
    def from_state(cls, state: dict) -> "CalibrationStats":
        stats = cls(state["num_layers"], state["num_heads"], state["num_loops"], state["head_dim"],
                    state["count"], state["total"], state["outer"])
        if state["samples"].numel():
            stats.samples = [state["samples"]]
        return stats
