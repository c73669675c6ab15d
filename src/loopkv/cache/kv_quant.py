"""`kv_quant`: b-bit K/V quantisation of the teacher's cache (LLA paper baseline, no training).
Keys are quantised per channel over groups of `group_size` tokens (keys have outlier channels),
values per token over d_head (KIVI's split); asymmetric min/max with a float16 scale and zero per
group. Keys of the newest tokens wait in full precision until a group fills. Codes are bit-packed.

Bytes per token, steady state (whole key groups), per (loop, layer, head):
    2 * d_head * bits / 8          codes of K and V
  + 4 * d_head / group_size        float16 scale and zero per key channel and group
  + 4                              float16 scale and zero per value token
times T * D * H_kv. Against a bf16 teacher (4 * d_head bytes) 4 bits is 4x less before the
scale/zero overhead, which the formula counts.
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache, concat, select_tokens
from loopkv.errors import LoopKVError
from loopkv.cache.bitpack import pack, unpack

BITS = (2, 3, 4, 8)
META_DTYPE = torch.float16


def quantize(x: torch.Tensor, bits: int, dim: int):
    """Asymmetric min/max quantisation along `dim`: (codes uint8, scale, zero) with
    x ~= codes * scale + zero and |error| <= scale / 2 (plus float16 rounding of scale/zero)."""
    low = x.amin(dim=dim, keepdim=True).to(META_DTYPE)
    high = x.amax(dim=dim, keepdim=True).to(META_DTYPE)
    scale = ((high.float() - low.float()) / (2**bits - 1)).clamp(min=1e-8).to(META_DTYPE)
    codes = ((x.float() - low.float()) / scale.float()).round().clamp(0, 2**bits - 1).to(torch.uint8)
    return codes, scale, low


def dequantize(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, dtype) -> torch.Tensor:
    return (codes.float() * scale.float() + zero.float()).to(dtype)


class QuantCache(LoopCache):
    name = "kv_quant"
    label = "kv_quant"
    config_keys = ("methods.kv_quant_group",)   # tokens per key-quantisation group
    not_checked = {
        "lossless": "lossy at every bit width; its codes are checked against the quantiser's error bound "
                    "in tests/cache/test_kv_quant.py",
        "teacher_forced": "no parallel view: a key's quantisation group is filled by later tokens",
    }
    known_failures = {
        "padding": "key groups are aligned to cache slots, left pads included: a left-padded row's groups hold "
                   "pads and other tokens than alone, so its quantised keys (and results) depend on its batch's "
                   "padding unless the pad count is a multiple of group_size",
    }

    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        """cache_bits / bits x fewer bytes (before the scale/zero overhead, which bytes_per_token counts),
        for the quantisers that exist (BITS)."""
        bits = cache_bits / ratio
        if any(math.isclose(bits, b, rel_tol=1e-2) for b in BITS):
            bits = min(BITS, key=lambda b: abs(b - bits))
            return {"kwargs": {"bits": bits}, "ratio": cache_bits / bits}
        return None

    @classmethod
    def configured_kwargs(cls, kwargs, methods_cfg, shape=None):
        return {**kwargs, "group_size": methods_cfg["kv_quant_group"]}

    def __init__(self, config, bits: int, group_size: int = 32):
        super().__init__(config)
        if bits not in BITS:
            raise ValueError(f"bits must be one of {BITS}, got {bits}")
        if group_size < 1 or config.head_dim % 8:
            raise ValueError(f"need group_size >= 1 and head_dim % 8 == 0, got {group_size}, {config.head_dim}")
        self.bits, self.group_size = bits, group_size
        self.eviction_granule = group_size   # a key group's scale and zero serve its G tokens together
        n = self.num_loops * self.num_layers
        # per entry: packed key groups (B, H, groups * G, dh * bits / 8) + scale/zero (B, H, groups, dh),
        # full-precision key residual (B, H, < G, dh), packed values (B, H, S, ...) + (B, H, S, 1) scale/zero
        self.k_codes, self.k_scale, self.k_zero = [None] * n, [None] * n, [None] * n
        self.k_residual: list[torch.Tensor | None] = [None] * n
        self.v_codes, self.v_scale, self.v_zero = [None] * n, [None] * n, [None] * n

    def update(self, loop, layer, positions, k, v):
        i = self.entry(loop, layer)
        new_k = self.rope(positions, k)
        past_k, past_v = self._read(i, k.dtype)
        self._write(i, new_k, v)
        if past_k is None:
            return new_k, v
        return torch.cat([past_k, new_k], dim=2), torch.cat([past_v, v], dim=2)

    def _read(self, i: int, dtype):
        if self.v_codes[i] is None:
            return None, None
        parts = []
        if self.k_codes[i] is not None:
            codes = unpack(self.k_codes[i], self.bits)                         # (B, H, groups*G, dh)
            b, h, s, d = codes.shape
            grouped = codes.reshape(b, h, s // self.group_size, self.group_size, d)
            keys = dequantize(grouped, self.k_scale[i][:, :, :, None], self.k_zero[i][:, :, :, None], dtype)
            parts.append(keys.reshape(b, h, s, d))
        if self.k_residual[i] is not None:
            parts.append(self.k_residual[i])
        values = dequantize(unpack(self.v_codes[i], self.bits), self.v_scale[i], self.v_zero[i], dtype)
        return torch.cat(parts, dim=2), values

    def _write(self, i: int, new_k: torch.Tensor, v: torch.Tensor) -> None:
        codes, scale, zero = quantize(v, self.bits, dim=-1)                    # per token
        self.v_codes[i] = concat(self.v_codes[i], pack(codes, self.bits))
        self.v_scale[i] = concat(self.v_scale[i], scale)
        self.v_zero[i] = concat(self.v_zero[i], zero)
        residual = concat(self.k_residual[i], new_k)
        whole = residual.shape[2] // self.group_size * self.group_size
        if whole:
            b, h, _, d = residual.shape
            groups = residual[:, :, :whole].reshape(b, h, whole // self.group_size, self.group_size, d)
            codes, scale, zero = quantize(groups, self.bits, dim=3)            # per channel over the group
            self.k_codes[i] = concat(self.k_codes[i], pack(codes.reshape(b, h, whole, d), self.bits))
            self.k_scale[i] = concat(self.k_scale[i], scale[:, :, :, 0])
            self.k_zero[i] = concat(self.k_zero[i], zero[:, :, :, 0])
        self.k_residual[i] = residual[:, :, whole:] if residual.shape[2] > whole else None

    def keep_tokens(self, index):
        """Keep the tokens at `index`: whole key groups of the quantised part (a group's scale and
        zero serve its G tokens; a partial group would need requantising), every residual key."""
        self._check_kept(index)
        g, held = self.group_size, self.get_seq_length()
        whole = held // g * g
        quantised, residual = index[index < whole], index[index >= whole]
        groups = quantised[::g] // g
        if len(quantised) % g or not torch.equal(quantised.view(-1, g), groups[:, None] * g + torch.arange(g)) \
                or not torch.equal(residual, torch.arange(whole, held)):
            raise LoopKVError(f"kv_quant evicts whole key groups of {g} tokens (and no key still waiting for "
                              f"its group): cannot keep {index.tolist()} of {held}")
        index, quantised, groups = (t.to(self.positions.device) for t in (index, quantised, groups))
        for store in ("v_codes", "v_scale", "v_zero"):
            setattr(self, store, select_tokens(getattr(self, store), 2, index))
        if len(groups):
            self.k_codes = select_tokens(self.k_codes, 2, quantised)
            self.k_scale = select_tokens(self.k_scale, 2, groups)
            self.k_zero = select_tokens(self.k_zero, 2, groups)
        else:   # every whole group freed: no quantised keys, as before the first group filled
            self.k_codes, self.k_scale, self.k_zero = ([None] * len(self.k_codes) for _ in range(3))
        self._keep_base_tokens(index)

    def loop_bytes_per_token(self, dtype):
        d, meta = self.head_dim, torch.tensor([], dtype=META_DTYPE).element_size()
        per_head = 2 * d * self.bits // 8 + 2 * meta * d / self.group_size + 2 * meta
        return int(self.num_loops * self.num_layers * self.num_kv_heads * per_head)

    def loop_tensors(self):
        stores = (self.k_codes, self.k_scale, self.k_zero, self.k_residual, self.v_codes, self.v_scale, self.v_zero)
        return [t for store in stores for t in store if t is not None]
