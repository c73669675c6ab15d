"""`lla`: Looped Latent Attention's cache. Each past token keeps one latent per (layer, head) for K
and one for V, encoding its pre-RoPE K/V across all T loops: c = (x - mu) W_down, x = [x_1..x_T].

A token's latent exists only once its last loop has run, so during its own forward a token's T
loops attend to its exact K/V (and to the other new tokens of the same forward exactly); it is
encoded at (loop T-1, layer d), when all its loops of layer d are known.

Read paths (config `read_path`):
- latent: only latents persist; loop t's K/V of past tokens are decoded on every read (x_hat_t =
  c W_up,t^T + mu_t) and K is rotated to each token's position. The capacity path.
- full: the reconstructed, rotated K/V of every loop are stored (written over the new tokens' exact
  K/V at the end of their forward): no memory saving, no decode per read (the paper's "full-memory" path).
- fused: latent storage as `latent`, but attention over past tokens reads the latents directly
  (kernels/latent_attention.py: K rebuilt per tile, V absorbed; the Triton kernel on CUDA, the tiled
  torch path elsewhere): no K/V of the context is materialised. New tokens attend to their own
  exact K/V and the two parts are merged through their log-sum-exp. The kernels rotate in the
  rotate-half layout; an interleaved-RoPE model (Huginn) is read in it by reordering the head dims
  of queries, keys and K's decoder rows alike (rope.half_layout_order), which leaves scores unchanged.

Bytes per token: latent = D * H * (r_k + r_v) * bytes(dtype);
                 full   = 2 * T * D * H * d_head * bytes(dtype) (same as the teacher);
plus, on a model with non-looped layers, their exact K/V (base.py), as every method.
Positions of cached tokens are kept as bookkeeping (an int64 per token; not K/V payload).
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, attention, concat, overwrite_tail
from loopkv.cache.budget import LatentBudget
from loopkv.cache.latent_codec import LAYOUTS, LatentCodec, model_sizes
from loopkv.kernels import cpu_kernels
from loopkv.kernels.latent_attention import latent_attention
from loopkv.models.rope import half_layout_order

READ_PATHS = ("latent", "full", "fused")


class LLACache(LatentBudget, LoopCache):
    name = "lla"
    label = "LLA"
    token_stores = {"latents": 2, "recon": 2}   # latents (B, groups, S, r); full path: (B, H, S, d)
    layout = "per_head"
    read_paths = READ_PATHS
    served_config_keys = ("methods.read_path",)
    bookkeeping = LoopCache.bookkeeping + (
        "_pending_kv", "_unwritten", "_rows", "_traced_latents", "_decoders", "_codec_version", "_cpu_module",
        "_read_memo", "_past_views", "_position_rows", "_kernel_order")   # a forward's scratch, codec rows, memos of reads

    def __init__(self, config, codec: LatentCodec, read_path: str = "latent"):
        # the codec's layout must be this method's; its sizes must be this model's
        super().__init__(config)
        if read_path not in READ_PATHS:
            raise ValueError(f"read_path must be one of {READ_PATHS}, got {read_path!r}")
        if codec.groups != LAYOUTS[self.layout]:
            raise ValueError(f"{self.name} needs a codec with groups {LAYOUTS[self.layout]}, got {codec.groups}")
        want = model_sizes(config)
        if codec.sizes != want:
            raise ValueError(f"codec sizes {codec.sizes} do not match the model {want}")
        self.codec = codec
        self.read_path = read_path
        D, T = self.num_layers, self.num_loops
        # per layer, (B, groups, S, r): a head's latents are contiguous for the reads (a token-major
        # (B, S, groups, r) store cost a transposing copy at every read, measured); stored() views them
        self.latents: dict[str, list[torch.Tensor | None]] = {"k": [None] * D, "v": [None] * D}
        self.recon: dict[str, list[torch.Tensor | None]] = {"k": [None] * (T * D), "v": [None] * (T * D)}
        self._pending_kv: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._unwritten: dict[int, dict[str, torch.Tensor]] = {}   # full path: layer -> this forward's latents
        # on the codec's device: a CPU index into CUDA weights would copy it over at every call
        self._rows = [codec.loop_rows(t).to(codec.mu_k.device) for t in range(T)]
        self._traced_latents: dict[int, tuple] = {}   # layer -> (trace, latents) for reconstruct()
        self._decoders: dict[tuple, tuple] = {}        # decoder rows per (layer, loop); encoders per layer
        self._codec_version: tuple = ()
        self._cpu_module = None
        self._read_memo: tuple | None = None           # a forward's fused-read inputs (_read_inputs)
        self._past_views: dict[int, tuple] = {}        # a forward's views of a layer's stores, until its encode
        self._position_rows = 0   # 1 + the largest cached position: the rows a RoPE table needs
        # fused read of an interleaved-RoPE model: the head-dim order that puts it in the kernels' layout
        self._kernel_order = (half_layout_order(self.head_dim, codec.mu_k.device)
                              if self.rotary.style != "rotate_half" else None)
        # (B, H, L, T, dh) -> the layer's group axes first, then (batch, token), then the codec's
        # concatenated axes in its order: a reshape then gives (G, B*L, width)
        axes = {"batch": 0, "head": 1, "token": 2, "loop": 3, "dim": 4}
        grouped = [a for a in codec.groups if a != "layer"]
        self._group_major = [axes[a] for a in (*grouped, "batch", "token", *codec.concat)]

    def append(self, loop, layer, positions, k, v):
        self._pending_kv.setdefault(layer, []).append((k, v))
        if self.read_path == "full":   # stored exact for this forward; end_forward writes the reconstruction over it
            i = self.entry(loop, layer)
            self.recon["k"][i] = concat(self.recon["k"][i], self.rope(positions, k))
            self.recon["v"][i] = concat(self.recon["v"][i], v)
        if loop == self.num_loops - 1:
            self._encode(layer)

    def update(self, loop, layer, positions, k, v):
        if self.read_path == "full":   # the store is what attention reads: one copy per call, as the teacher's
            self.append(loop, layer, positions, k, v)
            i = self.entry(loop, layer)
            return self.recon["k"][i], self.recon["v"][i]
        past_k, past_v = self._past(loop, layer)      # before this forward's tokens are encoded
        self.append(loop, layer, positions, k, v)
        new_k = self.rope(positions, k)
        if past_k is None:
            return new_k, v
        return torch.cat([past_k, new_k], dim=2), torch.cat([past_v, v.to(past_v.dtype)], dim=2)

    def attend(self, loop, layer, positions, q, k, v, mask):
        if self.read_path != "fused":
            return super().attend(loop, layer, positions, q, k, v, mask)
        views = self._past_views.get(layer)   # before this forward's tokens; the same for its T reads
        if views is None:
            views = self._past_views[layer] = (self.stored("k", layer), self.stored("v", layer))
        past_k, past_v = views
        self.append(loop, layer, positions, k, v)
        if past_k is None:
            return attention(q, self.rope(positions, k), v, mask)
        past = past_k.shape[1]
        # a decode step's token always sees itself: no mask among the new tokens
        own_mask = None if mask is None or q.shape[2] == 1 else mask[..., past:]
        key_valid, own_tables, rope_table = self._read_inputs(positions, mask, past, k)
        if self._kernel_order is not None:   # K's decoder rows and the tables are reordered the same way
            q, k = q[..., self._kernel_order], k[..., self._kernel_order]
        out, _ = latent_attention(q, past_k, past_v, *self._loop_decoders(layer, loop), self.positions, key_valid,
                                  self.rotary.theta, own=(k, v, own_mask), own_tables=own_tables,
                                  rope_table=rope_table, cpu_module=self._cpu_module)
        return out if out.dtype == q.dtype else out.to(q.dtype)

    def _read_inputs(self, positions, mask, past: int, k):
        """(key_valid, own_tables, rope_table) of a fused read: the same for the T*D calls of one
        forward, so built at its first call (at the embedded default, slicing and looking them up per
        call cost ~20 us of a ~100 us call). Past tokens precede every new one: their validity is the
        same for all queries (padding only), and None when every one is valid."""
        memo = self._read_memo
        if memo is None or memo[0] is not positions or memo[1] is not mask or memo[2] != past:
            key_valid = None if mask is None else mask[:, 0, -1, :past]
            if key_valid is not None and not key_valid.is_meta and bool(key_valid.all()):   # meta: probes
                key_valid = None
            own_tables, rope_table = self.rope_tables(positions, k.dtype), self.rope_table(self._position_rows, k.device)
            if self._kernel_order is not None:
                own_tables = tuple(t[..., self._kernel_order] for t in own_tables)
                rope_table = tuple(t[:, self._kernel_order] for t in rope_table)
            memo = self._read_memo = (positions, mask, past, key_valid, own_tables, rope_table)
        return memo[3:]

    def begin_forward(self, positions):
        super().begin_forward(positions)
        self._codec_version = self._current_codec_version()   # weights change between forwards only
        # the CPU kernels (built at first use), resolved once per forward rather than per call
        self._cpu_module = cpu_kernels.extension() if positions.device.type == "cpu" else None
        self._read_memo = None
        self._past_views = {}

    def _current_codec_version(self) -> tuple:
        return tuple((p._version, p.data_ptr()) for kind in ("k", "v") for p in self.codec.params(kind))

    def _loop_decoders(self, layer: int, loop: int) -> tuple[torch.Tensor, ...]:
        """(up_k, mu_k, up_v, mu_v): the rows of `layer`'s decoders that give `loop`, up (H_kv, d_head, r),
        mu (H_kv, d_head). Gathered once per codec version, not per call."""
        def gather():
            groups, rows, rows_of = self._groups(layer), self._rows[loop], []
            for kind in ("k", "v"):
                mu, _, up = self.codec.params(kind)
                rows_up, rows_mu = up[groups][:, rows].detach(), mu[groups][:, rows].detach()
                rows_up = rows_up.reshape(self.num_kv_heads, self.head_dim, up.shape[-1])
                rows_mu = rows_mu.reshape(self.num_kv_heads, self.head_dim)
                if kind == "k" and self._kernel_order is not None:
                    rows_up, rows_mu = rows_up[:, self._kernel_order], rows_mu[:, self._kernel_order]
                if rows_up.device.type == "cpu":   # (H_kv, r, d) in memory: the CPU kernel's layout, not copied per call
                    rows_up = rows_up.transpose(1, 2).contiguous().transpose(1, 2)
                rows_of += [rows_up, rows_mu]
            return tuple(rows_of)
        return self._gathered(("decoders", layer, loop), gather)

    def _encoder(self, layer: int) -> tuple[torch.Tensor, ...]:
        """(mu_k, down_k, mu_v, down_v) of `layer`'s groups, detached: the serving encode's operands."""
        def gather():
            (mu_k, down_k, _), (mu_v, down_v, _) = self.codec.params("k"), self.codec.params("v")
            groups = self._groups(layer)
            return tuple(p[groups].detach() for p in (mu_k, down_k, mu_v, down_v))
        return self._gathered(("encoder", layer), gather)

    def _gathered(self, key: tuple, gather):
        """gather() of codec rows, kept until the codec changes: the codec's parameters are read only
        then (Module getattr and slicing cost more than a decode step's arithmetic). A codec updated in
        place (training) is re-gathered; its version is read once per forward."""
        version = self._codec_version if self._new_positions is not None else self._current_codec_version()
        hit = self._decoders.get(key)
        if hit is None or hit[0] != version:
            hit = self._decoders[key] = (version, gather())
        return hit[1]

    def stored(self, kind: str, layer: int) -> torch.Tensor | None:
        """A layer's stored latents as (B, S, groups, r) (a view), or None before the first forward."""
        latent = self.latents[kind][layer]
        return None if latent is None else latent.transpose(1, 2)

    # -- internals -------------------------------------------------------------------------
    def _groups(self, layer: int) -> slice:
        """The codec groups of one layer (per head: H of them; heads joined: one)."""
        per_layer = self.codec.num_groups // self.num_layers
        return slice(layer * per_layer, (layer + 1) * per_layer)

    def _past(self, loop: int, layer: int):
        """Past tokens' (post-RoPE K, V) at (loop, layer) on the latent path, or (None, None) with no past."""
        if self.latents["k"][layer] is None:
            return None, None
        k = self._decode("k", layer, loop, self.stored("k", layer))
        v = self._decode("v", layer, loop, self.stored("v", layer))
        return self.rope(self.positions, k), v

    def _decode(self, kind: str, layer: int, loop: int, latent: torch.Tensor) -> torch.Tensor:
        """latent (B, S, groups of the layer, r) -> loop's pre-RoPE (B, H, S, d_head)."""
        x = self.codec.decode(kind, latent, self._groups(layer), self._rows[loop])   # (B, S, G, H*dh/G)
        b, s = x.shape[:2]
        return x.reshape(b, s, self.num_kv_heads, self.head_dim).transpose(1, 2)

    def _encode(self, layer: int) -> None:
        loops = self._pending_kv.pop(layer)
        latents = self._latents(layer, [step[0] for step in loops], [step[1] for step in loops])
        for kind, latent in latents.items():
            if self.read_path == "full":
                self._unwritten.setdefault(layer, {})[kind] = latent
            else:
                self._past_views.pop(layer, None)
                self.latents[kind][layer] = concat(self.latents[kind][layer], latent, dim=2)

    def _latents(self, layer: int, k_loops: list[torch.Tensor], v_loops: list[torch.Tensor]) -> dict:
        """Each loop's pre-RoPE K and V (B, H, L, dh) of one layer -> the tokens' latents (B, G, L, r),
        the store's layout: c = (x - mu) W_down as one batched matmul over the layer's groups. Serving
        on CPU runs the same operations in one C++ call (kernels/cpu_latent_encode.cpp); training
        (gradients to the codec) runs them here."""
        if k_loops[0].device.type == "cpu" and not (torch.is_grad_enabled() and self.codec.down_k.requires_grad):
            module = self._cpu_module if self._new_positions is not None else cpu_kernels.extension()
            if module is not None:
                return dict(zip(("k", "v"), module.encode_latents(k_loops, v_loops, *self._encoder(layer),
                                                                  self._group_major)))
        groups = self._groups(layer)
        (mu_k, down_k, _), (mu_v, down_v, _) = self.codec.params("k"), self.codec.params("v")
        mu_k, down_k, mu_v, down_v = mu_k[groups], down_k[groups], mu_v[groups], down_v[groups]
        return {"k": self._latent(k_loops, mu_k, down_k), "v": self._latent(v_loops, mu_v, down_v)}

    def _latent(self, loops: list[torch.Tensor], mu: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
        """One kind's latents; mu (G, W), down (G, W, r) of the layer's groups."""
        x = torch.stack(loops, dim=3)                                          # (B, H, L, T, dh)
        b, _, length = x.shape[:3]
        vectors = x.permute(*self._group_major).reshape(down.shape[0], b * length, -1)   # (G, B*L, W)
        return torch.bmm(vectors - mu.unsqueeze(1), down).unflatten(1, (b, length)).transpose(0, 1)

    def reconstruct(self, loop, layer, trace):
        # both read paths hand later tokens the same decoded values; only storage differs. A
        # layer's latents depend on all its loops, so they are encoded once per trace, not per loop.
        seen = self._traced_latents.get(layer)
        if seen is None or seen[0] is not trace:
            latents = self._latents(layer, *([trace.kv(kind, t, layer) for t in range(self.num_loops)]
                                             for kind in ("k", "v")))
            seen = self._traced_latents[layer] = (trace, latents)
        return tuple(self._decode(kind, layer, loop, seen[1][kind].transpose(1, 2)) for kind in ("k", "v"))

    def end_forward(self):
        # full-memory path: the new tokens' exact K/V, stored at their calls (attention read them), are
        # overwritten in place by their reconstruction, which is what later tokens must read. Writing
        # earlier would change what this forward's own later loops see; appending again would copy
        # every stored tensor a second time per step.
        for layer, latents in self._unwritten.items():
            for kind, latent in latents.items():
                for loop in range(self.num_loops):
                    x = self._decode(kind, layer, loop, latent.transpose(1, 2))
                    if kind == "k":
                        x = self.rope(self._new_positions, x)
                    overwrite_tail(self.recon[kind], self.entry(loop, layer), x)
        self._unwritten = {}
        if self.read_path == "fused" and not self._new_positions.is_meta:   # (capacity probes run on meta)
            self._position_rows = max(self._position_rows, int(self._new_positions.max()) + 1)
        self._past_views = {}
        super().end_forward()

    @property
    def past_mask_by_key(self):
        return self.read_path == "fused"   # the kernels take one validity per past key (key_valid)

    # -- accounting ------------------------------------------------------------------------
    def loop_bytes_per_token(self, dtype):
        if self.read_path == "full":
            return self.every_loop_bytes_per_token(dtype)
        return self.codec.bytes_per_token(dtype)

    def loop_tensors(self):
        stores = self.recon if self.read_path == "full" else self.latents
        return [t for kind in ("k", "v") for t in stores[kind] if t is not None]
