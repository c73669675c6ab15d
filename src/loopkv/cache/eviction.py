"""Token eviction composed with any KV method (LLA Table 9): attention sinks + a recent window.

A token at position q attends to the tokens at positions p < `sinks` (the sinks) and
q - `window` <= p <= q (its `window` predecessors and itself), and to nothing else; padding and
causality stay as the model's mask says. Between forwards the cache holds only what a later token
can still read: the sinks and the last `window` tokens of each row, freed from the wrapped method's
own stores (LoopCache.keep_tokens), so a context of n tokens holds min(n, sinks + window) tokens in
whatever form the method stores a token (latents, quantised codes, ...).

A method that frees slots in granules (kv_quant's key groups of G tokens: a group's scale and zero
serve all G) frees only whole, complete granules no row needs; the held slots are then
`held_slots(n, sinks, window, G)`, at most about 2G more than the sinks and the window.

Which held slots are real tokens is read from the last query's row of each forward's mask: a
forward whose last token in a row is a pad (right-padded continuations, a chunk of left pads) leaves
that pad marked real, held until the window passes it (memory only: no real token reads a pad).

The wrapper counts every token the model has seen (`get_seq_length`: the model derives positions
and its mask over cache order from it) and maps the mask's columns to the slots the method still
holds. Bytes per held token are the method's own (`bytes_per_token`); what the cache holds at a
context of n tokens is that times `held_slots`.
"""
from __future__ import annotations

import math

import torch

from loopkv.cache.base import LoopCache
from loopkv.errors import LoopKVError


def held_slots(n: int, sinks: int, window: int, granule: int = 1) -> int:
    """Slots held after n tokens (one row, unpadded) by a method freeing `granule` (G) slots at a
    time: n less the complete granules wholly past the sinks' granules and before the window,
    n - G * max(0, floor((n - window) / G) - ceil(sinks / G)); min(n, sinks + window) when G = 1."""
    g = granule
    return n - g * max(0, (n - window) // g - math.ceil(sinks / g))


class EvictingCache:
    """`inner` (a LoopCache) behind a sinks + window eviction policy. Speaks the forward protocol
    (base.py) to the model; the method below it sees only the tokens it still holds."""

    is_compileable = False
    is_croppable = False

    def __init__(self, inner: LoopCache, sinks: int, window: int):
        if not isinstance(inner, LoopCache):
            raise TypeError(f"eviction wraps a KV method's cache (a LoopCache), got {type(inner).__name__}")
        if isinstance(sinks, bool) or not isinstance(sinks, int) or sinks < 0:
            raise ValueError(f"sinks must be an integer >= 0, got {sinks!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if not inner.token_stores and type(inner).keep_tokens is LoopCache.keep_tokens:
            raise LoopKVError(f"KV method {inner.name!r} cannot evict tokens (it states no per-token stores)")
        self.inner, self.sinks, self.window = inner, sinks, window
        self.granule = inner.eviction_granule
        self._seen = 0
        self.slots = torch.zeros(0, dtype=torch.long)   # cache order (as the model counts) of the held tokens
        self._real: torch.Tensor | None = None           # (B, held) held slot is a real token of the row
        self._positions: torch.Tensor | None = None
        self._masks: dict[int, tuple] = {}
        self._last_mask: torch.Tensor | None = None

    # -- what the model and generate() read ------------------------------------------------
    def __getattr__(self, name):   # num_loops, num_layers, num_outer_layers, needs_base, ... of the method
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._seen

    @property
    def held(self) -> int:
        return len(self.slots)

    def bytes_per_token(self, dtype) -> int:
        """Bytes per held token: the method's."""
        return self.inner.bytes_per_token(dtype)

    def held_bytes(self, n: int, dtype) -> int:
        """Bytes the cache holds after a context of n tokens (one row, unpadded)."""
        return held_slots(n, self.sinks, self.window, self.granule) * self.inner.bytes_per_token(dtype)

    def cached_tensors(self):
        return self.inner.cached_tensors()

    def allocated_bytes(self) -> int:
        return self.inner.allocated_bytes()

    # -- the forward protocol -------------------------------------------------------------
    def expect_loops(self, loops: int) -> None:
        self.inner.expect_loops(loops)

    def begin_forward(self, positions: torch.Tensor) -> None:
        self._positions = positions
        self._masks = {}
        self._last_mask = None
        self.inner.begin_forward(positions)

    def attend(self, loop, layer, positions, q, k, v, mask):
        return self.inner.attend(loop, layer, positions, q, k, v, self._mask(mask, q.shape[2]))

    def attend_outer(self, layer, positions, q, k, v, mask):
        return self.inner.attend_outer(layer, positions, q, k, v, self._mask(mask, q.shape[2]))

    def attend_melt(self, loop, layer, positions, q, kv_melt, kv_base, mask):
        return self.inner.attend_melt(loop, layer, positions, q, kv_melt, kv_base, self._mask(mask, q.shape[2]))

    def end_forward(self) -> None:
        n = self._positions.shape[1]
        self.inner.end_forward()
        batch = self._positions.shape[0]
        real_new = (torch.ones(batch, n, dtype=torch.bool) if self._last_mask is None
                    else self._last_mask[:, 0, -1, -n:].cpu())   # the last query sees every real token, no pad
        self._real = real_new if self._real is None else torch.cat([self._real, real_new], dim=1)
        self.slots = torch.cat([self.slots, torch.arange(self._seen, self._seen + n)])
        self._seen += n
        self._positions, self._masks, self._last_mask = None, {}, None
        self._evict()

    def reorder_cache(self, beam_idx):
        self.inner.reorder_cache(beam_idx)
        self._real = self._real.index_select(0, beam_idx.cpu()) if self._real is not None else None

    # -- the policy -----------------------------------------------------------------------
    def _rule(self, key_positions: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        """(B, 1, L, S) query may read key: a sink, or within its window (itself included)."""
        keys, queries = key_positions[:, None, None, :], query_positions[:, None, :, None]
        return (keys < self.sinks) | (queries - keys <= self.window)

    def _mask(self, mask: torch.Tensor | None, n: int) -> torch.Tensor:
        """The model's mask over everything seen -> the mask over the held slots and the new tokens,
        with the eviction rule applied. Built once per forward (the T*D calls share it)."""
        memo = self._masks.get(id(mask))
        if memo is not None and memo[0] is mask:
            return memo[1]
        new = self._positions
        past = self.inner.positions if self.held else None
        keys = new if past is None else torch.cat([past.to(new.device), new], dim=1)
        rule = self._rule(keys, new)
        if mask is None:   # no past, no padding: plain causal among the new tokens
            base = torch.ones(n, n, dtype=torch.bool, device=new.device).tril()[None, None]
        else:
            columns = torch.cat([self.slots, torch.arange(self._seen, self._seen + n)]).to(mask.device)
            base = mask.index_select(3, columns)
            self._last_mask = mask
        out = base & rule
        if self.held and n > 1 and self.inner.past_mask_by_key:
            past_part = out[..., :self.held]
            if not bool((past_part == past_part[:, :, -1:]).all()):
                raise LoopKVError(f"the {self.inner.name} cache's read ({getattr(self.inner, 'read_path', '')}) "
                                  f"takes one visibility per past token, so a forward of {n} tokens over a "
                                  f"past cannot slide a window; evict with another read path or one token a step")
        self._masks[id(mask)] = (mask, out)
        return out

    def _evict(self) -> None:
        """Free the held slots no later token of any row can read (whole granules)."""
        positions = self.inner.positions.cpu()                      # (B, held)
        next_query = positions.max(dim=1, keepdim=True).values + 1
        needed = (self._real & ((positions < self.sinks) | (positions >= next_query - self.window))).any(dim=0)
        g = self.granule
        complete = self.held // g
        if complete == 0:
            return
        free = ~needed[:complete * g].view(complete, g).any(dim=1)   # granules no row needs
        if not bool(free.any()):
            return
        keep = torch.ones(self.held, dtype=torch.bool)
        keep[:complete * g] = ~free.repeat_interleave(g)
        index = keep.nonzero()[:, 0]
        self.inner.keep_tokens(index)
        self.slots = self.slots[index]
        self._real = self._real[:, index]


def evicting_factory(factory, sinks: int, window: int):
    """A cache factory (settings.cache_factory) whose caches evict: sinks + window."""
    return lambda: EvictingCache(factory(), sinks, window)

