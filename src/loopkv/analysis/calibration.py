"""Calibration: the teacher's pre-RoPE K and V for every loop, layer and head, on calibration prompts.

Two products, because paper scale cannot keep raw activations (Ouro-1.4B: 393k values per token):
- streaming moments of the codec vectors x of each requested layout (see cache.latent_codec;
  per_head: x = [x_1; ...; x_T] per (layer, head), width T*d_head): count, sum and sum of outer
  products in float64. The SVD initialisation needs exactly these (mean and centred covariance);
- a seeded random sample of whole tokens, (K|V, n, D, H, T, d_head), for the per-axis spectra,
  variance decomposition and convergence diagnostics.
Moments accumulate on the model's device (at Ouro-1.4B the per_loop outer products are 6 GB of
float64 updated every batch); the sample and the saved state are on the host.
"""
from __future__ import annotations

import torch

from loopkv.cache.capture import CaptureCache
from loopkv.cache.latent_codec import LAYOUTS, to_vectors
from loopkv.utils.device import model_device


@torch.no_grad()
def capture_kv(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **forward_kwargs):
    """Pre-RoPE (K, V) of every token, each of shape (B, L, D, H, T, d_head), in float32: T loops (Huginn:
    core steps) of D looped layers. `forward_kwargs` replace the model's own (Huginn: input_states)."""
    config = model.config
    T, D = config.total_ut_steps, config.num_hidden_layers
    keys, values = {}, {}

    def sink(loop, layer, k, v):
        keys[loop, layer], values[loop, layer] = k.float(), v.float()

    device = model_device(model)
    input_ids = input_ids.to(device)
    attention_mask = None if attention_mask is None else attention_mask.to(device)
    forward_kwargs = {**model.loop_forward_kwargs(input_ids), **forward_kwargs}
    model(input_ids, attention_mask=attention_mask, cache=CaptureCache(config, sink), use_cache=False,
          **forward_kwargs)

    def assemble(store):
        # store[t, d]: (B, H, L, dh) -> (B, D, H, L, T, dh) -> (B, L, D, H, T, dh)
        per_layer = [torch.stack([store[t, d] for t in range(T)], dim=-2) for d in range(D)]
        return torch.stack(per_layer, dim=1).permute(0, 3, 1, 2, 4, 5).contiguous()

    return assemble(keys), assemble(values)


def _host(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.cpu()


class Moments:
    """Count, sum and sum of outer products of (G, X) vectors, in float64."""

    def __init__(self):
        self.count = 0
        self.total: torch.Tensor | None = None
        self.outer: torch.Tensor | None = None

    def add(self, vec: torch.Tensor) -> None:
        """vec (N, G, X)."""
        x = vec.double().transpose(0, 1)                                   # (G, N, X)
        if self.total is None:
            self.total = torch.zeros(x.shape[0], x.shape[2], dtype=torch.float64, device=x.device)
            self.outer = torch.zeros(x.shape[0], x.shape[2], x.shape[2], dtype=torch.float64, device=x.device)
        self.total += x.sum(1)
        self.outer += x.transpose(1, 2) @ x
        self.count += vec.shape[0]

    def mean(self) -> torch.Tensor:
        return self.total / self.count

    def covariance(self) -> torch.Tensor:
        """Centred second moment (G, X, X): the SVD of the centred data is its eigen-decomposition."""
        mu = self.mean()
        return self.outer / self.count - mu[:, :, None] * mu[:, None, :]

    def state(self) -> dict:
        return {"count": self.count, "total": _host(self.total), "outer": _host(self.outer)}

    @classmethod
    def from_state(cls, state: dict) -> "Moments":
        m = cls()
        m.count, m.total, m.outer = state["count"], state["total"], state["outer"]
        return m


class Calibration:
    """Moments per (layout, kind) and a raw sample of tokens, accumulated batch by batch."""

    def __init__(self, layouts: tuple[str, ...] = ("per_head",)):
        self.layouts = tuple(layouts)
        self.moments = {(layout, kind): Moments() for layout in self.layouts for kind in ("k", "v")}
        self.samples: list[torch.Tensor] = []

    def add(self, k: torch.Tensor, v: torch.Tensor, sample: torch.Tensor | None = None) -> None:
        """k, v (N, D, H, T, dh) for N tokens; `sample`: indices of tokens to keep raw (float16)."""
        for layout in self.layouts:
            for kind, x in (("k", k), ("v", v)):
                self.moments[layout, kind].add(to_vectors(x, LAYOUTS[layout]))
        if sample is not None and len(sample):
            sample = sample.to(k.device)
            self.samples.append(torch.stack([k[sample], v[sample]]).to(torch.float16).cpu())

    def sample_tensor(self) -> torch.Tensor:
        """(2, n, D, H, T, dh): sampled tokens' K (index 0) and V (index 1)."""
        return torch.cat(self.samples, dim=1) if self.samples else torch.empty(0)

    def state(self) -> dict:
        return {"layouts": self.layouts, "samples": self.sample_tensor(),
                "moments": {f"{layout}/{kind}": m.state() for (layout, kind), m in self.moments.items()}}

    @classmethod
    def from_state(cls, state: dict) -> "Calibration":
        cal = cls(tuple(state["layouts"]))
        cal.moments = {tuple(key.split("/")): Moments.from_state(m) for key, m in state["moments"].items()}
        if state["samples"].numel():
            cal.samples = [state["samples"]]
        return cal


@torch.no_grad()
def run_calibration(model, rows: torch.Tensor, batch_size: int, layouts: tuple[str, ...], sample_tokens: int,
                    seed: int, progress: bool = True) -> Calibration:
    """Feed calibration rows (N, L) through the teacher; accumulate moments and a token sample.
    The sample is spread evenly over all tokens (a seeded choice of `sample_tokens` of them)."""
    from tqdm import tqdm

    calibration = Calibration(layouts)
    n_rows, length = rows.shape
    total = n_rows * length
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.zeros(total, dtype=torch.bool)
    chosen[torch.randperm(total, generator=generator)[:sample_tokens]] = True
    for start in tqdm(range(0, n_rows, batch_size), desc="calibration", disable=not progress):
        batch = rows[start:start + batch_size]
        k, v = capture_kv(model, batch)
        flat = chosen[start * length:(start + len(batch)) * length]
        calibration.add(k.flatten(0, 1), v.flatten(0, 1), sample=flat.nonzero().flatten())
    return calibration


# what a calibration state holds (Calibration.state), checked when it is read
CALIBRATION_FIELDS = {"layouts": (tuple, list), "samples": torch.Tensor, "moments": dict}
MOMENT_FIELDS = {"count": int, "total": (torch.Tensor, type(None)), "outer": (torch.Tensor, type(None))}


def read_calibration_state(path) -> dict:
    """The saved state of a calibration, its fields and shapes checked: a truncated, corrupt or
    foreign file raises LoopKVError naming it."""
    from loopkv.errors import LoopKVError
    from loopkv.utils.checked_io import check_fields, load_pt

    state = load_pt(path, "calibration", CALIBRATION_FIELDS, hint="; re-run the calibrate stage")
    where = f"calibration {path}"
    for key, moments in state["moments"].items():
        check_fields(moments, MOMENT_FIELDS, f"{where}: moments {key!r}")
    wanted = {f"{layout}/{kind}" for layout in state["layouts"] for kind in ("k", "v")}
    if set(state["moments"]) != wanted:
        raise LoopKVError(f"{where}: moments for {sorted(state['moments'])}, expected {sorted(wanted)} "
                          f"(layouts {list(state['layouts'])})")
    samples = state["samples"]
    if samples.numel() and (samples.ndim != 6 or samples.shape[0] != 2):
        raise LoopKVError(f"{where}: samples of shape {tuple(samples.shape)}, expected (2, n, D, H, T, d_head)")
    return state


def load_calibration(path) -> Calibration:
    return Calibration.from_state(read_calibration_state(path))
