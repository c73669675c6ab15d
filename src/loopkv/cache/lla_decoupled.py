"""`lla_decoupled`: LLA with decoupled RoPE (LLA Appendix J, Table 14): the path where the cache's
K decoder folds into the query, so attention over the past runs in latent space.

The model it serves is the teacher with RoPE dropped from each head's content dims (every query and
key, past and new alike: models/rope.Rotary with `rotated_pairs`), and, optionally, the queries'
content part passed through a learned adapter. That changes the teacher's function (content scores
no longer depend on distance): what Table 14 measures is what this costs in held-out KL / top-1
against full-RoPE LLA. The codec (cache/decoupled_codec.py) stores per token and (layer, head) a
K-content latent, one rotated slice of the rope dims for all loops, and LLA's V latent.

A token's latents exist once its last loop ran; during its own forward its loops attend to its exact
K/V (rope dims rotated, content dims not), as in LLA.

Read paths (config `read_path`):
- latent: loop t's K/V of past tokens decoded on every read, then attention.
- full: the decoded K/V of every loop are stored (no memory saving; what a distillation's view reads).
- fused: the absorbed read (kernels/absorbed_attention.py): queries folded into K's decoder, scores
  and values in latent space, O(r_k + d_rope + r_v) per past key; the new tokens' exact part merged
  through the log-sum-exp.

Bytes per token: latent/fused D * H * (r_k + d_rope + r_v) * bytes(dtype); full 2 * T * D * H * d_head * bytes.
"""
from __future__ import annotations

import torch

from loopkv.cache.base import LoopCache, attention, concat, overwrite_tail
from loopkv.cache.budget import latent_setting
from loopkv.cache.decoupled_codec import DecoupledCodec
from loopkv.cache.latent_codec import LAYOUTS, model_sizes
from loopkv.errors import LoopKVError
from loopkv.kernels.absorbed_attention import absorbed_attention, fold_query
from loopkv.kernels.latent_attention import exact_attention_with_lse, merge_partial_attention
from loopkv.models.rope import Rotary

READ_PATHS = ("latent", "full", "fused")


class LLADecoupledCache(LoopCache):
    name = "lla_decoupled"
    label = "LLA (decoupled RoPE)"
    layout = "per_head"          # SVD-initialised from LLA's per-head moments (the content dims' rows of them)
    read_paths = READ_PATHS
    config_keys = ("methods.rope_share", "methods.query_adapter")
    served_config_keys = ("methods.read_path",)
    token_stores = {"keys": 2, "values": 2, "recon_k": 2, "recon_v": 2}
    bookkeeping = LoopCache.bookkeeping + ("_pending_kv", "_unwritten", "_traced", "_full_rotary", "_query_tables",
                                           "_index", "_rows", "_codec_version")
    outer_layers_refused = ("Table 14 is a study of Ouro's decoupled attention; a model's non-looped layers "
                            "would keep full RoPE beside it, which no paper measures")
    not_checked = {"lossless": "dropping RoPE from the content dims changes the model: no setting gives the "
                               "teacher's logits"}

    # -- budget ------------------------------------------------------------------------------
    @classmethod
    def setting_at_ratio(cls, shape, ratio, cache_bits=16, k_share=0.375):
        """LLA's per-head budget r_k + r_v (the rope slice is taken out of it in configured_kwargs,
        where d_rope is known: the total, hence the ratio, is unchanged)."""
        return latent_setting(shape, LAYOUTS[cls.layout], ratio, k_share)

    @classmethod
    def configured_kwargs(cls, kwargs, methods_cfg, shape=None):
        """d_rope = methods.rope_share of the head (whole pairs); d_rope values of the per-head budget go
        to the rotated slice, the rest is split K/V by k_share."""
        share, head_dim = methods_cfg["rope_share"], shape.head_dim
        d_rope = 2 * round(share * head_dim / 2)
        if not 2 <= d_rope < head_dim:
            raise LoopKVError(f"methods.rope_share = {share:g} of d_head {head_dim} keeps {d_rope} dims rotated: "
                              f"it must keep at least one pair and leave content dims")
        total = kwargs["rank_k"] + kwargs["rank_v"]
        rest = total - d_rope
        if rest < 2:
            raise LoopKVError(f"methods.rope_share = {share:g} (d_rope {d_rope}) leaves {rest} of the {total} values "
                              f"a (layer, head) keeps per token at this budget: a latent needs 2 or more")
        rank_k = max(1, round(rest * methods_cfg["k_share"]))
        width_k = shape.loops * (head_dim - d_rope)   # K's latent spans the content dims only
        if rank_k > width_k or rest - rank_k < 1:
            raise LoopKVError(f"methods.rope_share = {share:g} and methods.k_share = {methods_cfg['k_share']:g} give "
                              f"r_k {rank_k}, r_v {rest - rank_k}: r_k must be at most the content width "
                              f"T x (d_head - d_rope) = {width_k} and r_v at least 1")
        return {"rank_k": rank_k, "rank_v": rest - rank_k, "d_rope": d_rope,
                "query_adapter": bool(methods_cfg["query_adapter"])}

    @classmethod
    def new_codec(cls, kwargs: dict, config) -> DecoupledCodec:
        cls.check_serves(config)   # refused before anything is built or trained
        return DecoupledCodec(model_sizes(config), {"k": kwargs["rank_k"], "v": kwargs["rank_v"]}, kwargs["d_rope"],
                              getattr(config, "rope_style", "rotate_half"), config.num_attention_heads,
                              kwargs["query_adapter"])

    # -- the cache ---------------------------------------------------------------------------
    def __init__(self, config, codec: DecoupledCodec, read_path: str = "latent"):
        super().__init__(config)
        if read_path not in READ_PATHS:
            raise ValueError(f"read_path must be one of {READ_PATHS}, got {read_path!r}")
        if not isinstance(codec, DecoupledCodec) or codec.sizes != model_sizes(config):
            raise ValueError(f"{self.name} needs a DecoupledCodec of sizes {model_sizes(config)}")
        self.codec, self.read_path = codec, read_path
        self._full_rotary = self.rotary   # the teacher's: how the model rotated the queries it hands over
        self.rotary = Rotary(self.head_dim, self.rotary.theta, self.rotary.style, rotated_pairs=codec.d_rope // 2)
        D, T = self.num_layers, self.num_loops
        self.keys: list[torch.Tensor | None] = [None] * D     # (B, H, S, r_k + d_rope): [c_k, rotated k_R]
        self.values: list[torch.Tensor | None] = [None] * D   # (B, H, S, r_v)
        self.recon_k: list[torch.Tensor | None] = [None] * (T * D)   # full path: decoded, rope dims rotated
        self.recon_v: list[torch.Tensor | None] = [None] * (T * D)
        self._pending_kv: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._unwritten: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}   # full path: layer -> new latents
        self._traced: dict[int, tuple] = {}
        self._rows: dict[tuple, tuple] = {}          # the fused read's decoder rows, per codec version
        self._codec_version: tuple = ()
        self._query_tables = None
        # content dims then rope dims -> head dims: a (content, rope) concatenation indexed by it is a head vector
        self._index = torch.argsort(torch.cat([codec.content_idx, codec.rope_idx]))

    def read_query(self, loop, layer, positions, q):
        """The decoupled model's query: content dims back to their unrotated values (through the
        adapter when there is one), rope dims as the teacher rotated them."""
        # un-rotated in float32 at least (in bf16 the round trip would add its own error), cast back after
        dtype = torch.promote_types(q.dtype, torch.float32)
        tables = self._query_tables
        if tables is None or tables[0] is not positions or tables[1].dtype != dtype:
            tables = self._query_tables = (positions, *self._full_rotary.cos_sin(positions, dtype))
        content = self.codec.content_idx
        unrotated = self._full_rotary.apply(q.to(dtype), tables[1], -tables[2])[..., content]
        if self.codec.query_adapter:
            heads = q.shape[1]
            adapter = self.codec.adapter[layer * heads:(layer + 1) * heads].to(dtype)
            unrotated = torch.einsum("bhlc,hce->bhle", unrotated, adapter)
        return q.index_copy(-1, content, unrotated.to(q.dtype))

    def append(self, loop, layer, positions, k, v, own_k=None):
        """Store the new tokens' K/V at (loop, layer) (their latents once their last loop ran)."""
        self._pending_kv.setdefault(layer, []).append((k, v))
        if self.read_path == "full":   # stored exact for this forward; end_forward writes the reconstruction over it
            i = self.entry(loop, layer)
            own_k = self.rope(positions, k) if own_k is None else own_k
            self.recon_k[i], self.recon_v[i] = concat(self.recon_k[i], own_k), concat(self.recon_v[i], v)
            if loop == self.num_loops - 1:
                self._unwritten[layer] = self._encode(layer, positions)
        elif loop == self.num_loops - 1:
            new_keys, new_values = self._encode(layer, positions)
            self.keys[layer], self.values[layer] = concat(self.keys[layer], new_keys), concat(self.values[layer], new_values)

    def attend(self, loop, layer, positions, q, k, v, mask):
        q = self.read_query(loop, layer, positions, q)
        own_k = self.rope(positions, k)
        past_keys, past_values = self.keys[layer], self.values[layer]    # before this forward's tokens
        self.append(loop, layer, positions, k, v, own_k)
        if self.read_path == "full":
            i = self.entry(loop, layer)
            return attention(q, self.recon_k[i], self.recon_v[i], mask)
        if past_keys is None:
            return attention(q, own_k, v, mask)
        if self.read_path == "fused":
            return self._absorbed(loop, layer, q, past_keys, past_values, own_k, v, mask)
        past_k, past_v = self._decoded(loop, layer, past_keys, past_values)
        return attention(q, torch.cat([past_k, own_k], dim=2), torch.cat([past_v, v.to(past_v.dtype)], dim=2), mask)

    def update(self, loop, layer, positions, k, v):
        raise NotImplementedError(f"{self.name} computes attention in attend(): its queries change too")

    def end_forward(self):
        # full path: this forward's exact K/V, read by its own loops, are overwritten by their decoding
        for layer, (keys, values) in self._unwritten.items():
            for loop in range(self.num_loops):
                i = self.entry(loop, layer)
                k, v = self._decoded(loop, layer, keys, values)
                for stores, x in ((self.recon_k, k), (self.recon_v, v)):
                    overwrite_tail(stores, i, x)
        self._unwritten = {}
        super().end_forward()

    # -- the codec's view ----------------------------------------------------------------------
    def reconstruct(self, loop, layer, trace):
        seen = self._traced.get(layer)
        if seen is None or seen[0] is not trace:   # a layer's latents depend on all its loops: once per trace
            k_loops = [trace.kv("k", t, layer) for t in range(self.num_loops)]
            v_loops = [trace.kv("v", t, layer) for t in range(self.num_loops)]
            seen = self._traced[layer] = (trace, *self._latents(layer, k_loops, v_loops))
        _, (c_k, k_rope), c_v = seen
        return (self._assemble(self.codec.decode("k", c_k, self._groups(layer), loop), k_rope).transpose(1, 2),
                self.codec.decode("v", c_v, self._groups(layer), loop).transpose(1, 2))

    # -- internals -------------------------------------------------------------------------------
    def _groups(self, layer: int) -> slice:
        return slice(layer * self.num_kv_heads, (layer + 1) * self.num_kv_heads)

    def _latents(self, layer, k_loops, v_loops):
        """Each loop's pre-RoPE K and V (B, H, L, d) -> ((c_k (B, L, H, r_k), pre-RoPE k_R (B, L, H, d_rope)),
        c_v (B, L, H, r_v))."""
        groups, codec = self._groups(layer), self.codec
        k = torch.stack(k_loops, dim=3).transpose(1, 2)     # (B, L, H, T, d)
        v = torch.stack(v_loops, dim=3).transpose(1, 2)
        c_k = codec.encode("k", codec.vectors("k", k), groups)
        return (c_k, codec.rope_slice(k, groups)), codec.encode("v", codec.vectors("v", v), groups)

    def _assemble(self, content: torch.Tensor, rope_part: torch.Tensor) -> torch.Tensor:
        """(..., d_c) content and (..., d_rope) rope dims -> (..., d_head) head vectors."""
        return torch.cat([content, rope_part.to(content.dtype)], dim=-1)[..., self._index]

    def _encode(self, layer, positions):
        """The new tokens' stored form: keys (B, H, L, r_k + d_rope) with the rope slice rotated, values (B, H, L, r_v)."""
        loops = self._pending_kv.pop(layer)
        (c_k, k_rope), c_v = self._latents(layer, [s[0] for s in loops], [s[1] for s in loops])
        zeros = torch.zeros(*c_k.shape[:-1], self.codec.d_content, dtype=k_rope.dtype, device=k_rope.device)
        rotated = self.rope(positions, self._assemble(zeros, k_rope).transpose(1, 2))   # (B, H, L, d)
        return torch.cat([c_k.transpose(1, 2), rotated[..., self.codec.rope_idx].to(c_k.dtype)], dim=-1), c_v.transpose(1, 2)

    def _decoded(self, loop, layer, keys, values):
        """Stored keys/values (B, H, S, .) -> loop's K (rope dims as stored, rotated) and V (B, H, S, d)."""
        groups, r_k = self._groups(layer), self.codec.ranks["k"]
        content = self.codec.decode("k", keys[..., :r_k].transpose(1, 2), groups, loop).transpose(1, 2)
        v = self.codec.decode("v", values.transpose(1, 2), groups, loop).transpose(1, 2)
        return self._assemble(content, keys[..., r_k:]), v

    def _absorbed(self, loop, layer, q, past_keys, past_values, own_k, own_v, mask):
        """The past in latent space (queries folded into K's decoder), the new tokens exact, merged."""
        dtype = torch.promote_types(q.dtype, torch.float32)
        up, mu, up_v, mu_v = self._read_rows(layer, loop, q.shape[1] // self.num_kv_heads, dtype)
        q_c, q_r = q[..., self.codec.content_idx].to(dtype), q[..., self.codec.rope_idx].to(dtype)
        folded, bias = fold_query(q_c, q_r, up, mu)
        past = past_keys.shape[2]
        key_valid = None if mask is None else mask[:, 0, -1, :past]
        out, lse = absorbed_attention(folded, bias, past_keys, past_values, up_v, mu_v, key_valid, q.shape[-1] ** -0.5)
        own_mask = None if mask is None or q.shape[2] == 1 else mask[..., past:]
        own_out, own_lse = exact_attention_with_lse(q, own_k, own_v, own_mask)
        merged, _ = merge_partial_attention(out, lse, own_out, own_lse)
        return merged.to(q.dtype)

    def _read_rows(self, layer, loop, group, dtype):
        """(K's decoder rows per query head (Hq, d_c, r_k), their mean (Hq, d_c), V's (H_kv, d, r_v), (H_kv, d))
        of (layer, loop), gathered once per codec version (weights change between forwards only)."""
        key = (layer, loop, group, dtype)
        hit = self._rows.get(key)
        if hit is None or hit[0] != self._codec_version:
            groups, codec = self._groups(layer), self.codec
            (mu_k, _, up_k), (mu_v, _, up_v) = codec.params("k"), codec.params("v")
            rows_k, rows_v = codec.loop_rows("k", loop), codec.loop_rows("v", loop)
            rows = (up_k[groups][:, rows_k].detach().to(dtype).repeat_interleave(group, dim=0),
                    mu_k[groups][:, rows_k].detach().to(dtype).repeat_interleave(group, dim=0),
                    up_v[groups][:, rows_v].detach(), mu_v[groups][:, rows_v].detach())
            hit = self._rows[key] = (self._codec_version, rows)
        return hit[1]

    def begin_forward(self, positions):
        super().begin_forward(positions)
        self._codec_version = tuple((p._version, p.data_ptr()) for p in self.codec.parameters())

    @property
    def past_mask_by_key(self):
        return self.read_path == "fused"   # one validity per past key

    # -- accounting --------------------------------------------------------------------------------
    def loop_bytes_per_token(self, dtype):
        if self.read_path == "full":
            return self.every_loop_bytes_per_token(dtype)
        return self.codec.bytes_per_token(dtype)

    def loop_tensors(self):
        stores = (self.recon_k, self.recon_v) if self.read_path == "full" else (self.keys, self.values)
        return [t for store in stores for t in store if t is not None]
