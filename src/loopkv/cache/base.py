"""The one interface between attention and KV storage in a looped LM.

A looped LM runs D shared layers T times per token. Attention at (loop t, layer d) hands its
RoPE'd queries and the new tokens' pre-RoPE keys and values to `attend(t, d, positions, q, k, v,
mask)` and gets the attention output back. By default that is `update(t, d, positions, k, v)` --
post-RoPE keys and values for every token so far, past tokens as the method stores them, new tokens
exact -- followed by scaled dot-product attention; a method may override `attend` to compute the
same thing without materialising K/V (e.g. attention read straight from latents). How past tokens
are stored (all T*D entries, a latent per token, one overwritten row, quantised, ...) is entirely
the method's business: adding a KV method means one file with one subclass and a registry entry.

Everything the rest of loopkv knows about a method is stated on its class (see LoopCache): its
name and report label, whether a compression ratio configures it, its budget rule (the setting at a
ratio), the config keys it reads, whether it needs a codec, its read paths, its bytes per token.
Registries, config validation, the workflow's config slices and the tests derive from these.

Call order for one forward over L new tokens:
    begin_forward(positions)                  # once
    attend(t, d, positions, q, k, v, mask)    # for t in range(T), for d in range(D)
    end_forward()                             # once; the L tokens now count as cached

A model may also have non-looped ("outer") layers, run once per token outside the loop (Huginn's
prelude and coda, before and after the loops; the config states `num_outer_layers`, Ouro has none):
those call `attend_outer(i, positions, q, k, v, mask)` for i in range(num_outer_layers), a key family
of their own, so no method mistakes them for a loop. Every method keeps their K/V exact, here in the
base class: the loop axis is what the methods compress (LLA Table 3's ratios are over the looped K/V),
so a method states its bytes and tensors of the looped layers (`loop_bytes_per_token`, `loop_tensors`)
and the cache's totals add the non-looped layers' (`bytes_per_token`, `cached_tensors`). A model whose
loop count is a forward argument (Huginn's num_steps) says how many loops the next forward runs
(`expect_loops`): a cache is built for the config's count, and only the teacher's resizes.
The config's `rope_style` (models/rope.py; rotate-half when absent) says how the cache rotates keys.
A method declares what it handles (`outer_layers_refused`, `rope_styles`); a model that needs more is
refused when the cache is built.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch
import torch.nn.functional as F

from loopkv.errors import LoopKVError
from loopkv.models.rope import ROPE_STYLES, Rotary


# read by every method's setting, with methods.budgets.<label> of the budget it runs at (none at 1x)
SHARED_CONFIG_KEYS = ("methods.cache_dtype", "methods.k_share")


class LoopCache(ABC):
    """Base class for every KV method. Subclasses state their bytes per token as a formula."""

    # -- the method, as the rest of loopkv sees it (class attributes; defaults here) -------
    name: str = ""                  # registry key: config files, CLI, result paths
    label: str = ""                 # its name in reports (tables, figures)
    budgeted: bool = True           # configured by a compression ratio (a Table 1 row at a budget)
    layout: str | None = None       # codec methods: the codec layout (latent_codec.LAYOUTS) whose calibration
                                    # moments SVD-initialise its codec, then distilled; None = no codec
    read_paths: tuple[str, ...] = ()   # ways to read the cache (config methods.read_path), default first
    model_variant: bool = False     # served by a model of its own (untrained_model), not the teacher's weights
    # config keys (dotted paths) a setting of the method reads beyond SHARED_CONFIG_KEYS, and those a
    # job that serves (evaluates) it reads on top of these
    config_keys: tuple[str, ...] = ()
    served_config_keys: tuple[str, ...] = ()
    # attributes of an instance that hold no K/V payload (positions, tables, memos): every other
    # tensor the cache holds counts as its stored bytes (tests count them against the formula)
    bookkeeping: tuple[str, ...] = ("positions", "_new_positions", "_rope_tables", "_rope_table")
    # the method-independent checks (tests/cache/test_every_method.py) that do not apply: check -> why;
    # and those it is known to fail, a defect to fix (check -> what fails): expected to fail until fixed
    not_checked: dict[str, str] = {}
    known_failures: dict[str, str] = {}

    # token eviction (cache/eviction.py): the attributes holding per-token payload -> their token axis
    # (lists or dicts of lists of tensors; the non-looped layers' and the positions are the base's),
    # and how many consecutive cache slots it frees at once (quantised key groups: group_size)
    token_stores: dict[str, int] = {}
    eviction_granule: int = 1

    # the models it serves: with non-looped layers (stored exact, attend_outer), RoPE layouts its keys may use
    outer_layers_refused: str = ""   # why not, where a method does not serve them (empty: it does)
    rope_styles: tuple[str, ...] = ROPE_STYLES

    # Attributes transformers' generate() inspects on a cache object.
    is_compileable = False
    is_croppable = False

    # -- budget and configuration (class level: no model needed) -------------------------
    @classmethod
    def setting_at_ratio(cls, shape, ratio: float, cache_bits: int = 16, k_share: float = 0.375) -> dict | None:
        """The budget rule: {"kwargs": constructor arguments, "ratio": achieved} of the setting that
        stores `ratio` times fewer bytes per token than the teacher's full cache of `shape`
        (budget.CacheShape) at `cache_bits` bits, or None where the method cannot reach it.
        `k_share`: K's share of a latent budget (codec methods)."""
        raise NotImplementedError(f"KV method {cls.name!r} states no budget rule")

    @classmethod
    def configured_kwargs(cls, kwargs: dict, methods_cfg: dict, shape=None) -> dict:
        """A setting's constructor arguments with the method's own config keys (`config_keys`, read
        from config section `methods`) applied; they are present (settings.configured_setting checks).
        `shape`: the model's budget.CacheShape (a key may be relative to it)."""
        return kwargs

    @classmethod
    def new_codec(cls, kwargs: dict, config):
        """A codec method's untrained codec at a setting (its constructor arguments): by default the
        LatentCodec of its layout at the setting's ranks; a method with a codec of its own says so."""
        from loopkv.cache.latent_codec import LAYOUTS, LatentCodec, model_sizes

        return LatentCodec(model_sizes(config), LAYOUTS[cls.layout], {"k": kwargs["rank_k"], "v": kwargs["rank_v"]})

    @classmethod
    def lossless_setting(cls, shape) -> dict | None:
        """Constructor arguments under which the method hands attention exactly the teacher's K/V on
        a model of `shape` (codec methods: of a lossless codec), or None where it has none."""
        return None

    @classmethod
    def untrained_model(cls, teacher):
        """The model a cache of this method serves, built from `teacher` with nothing trained: the
        teacher itself, unless the method is a model variant (then its own weights at their init)."""
        return teacher

    @classmethod
    def check_serves(cls, config) -> None:
        """Refuse a model the method does not serve (non-looped layers, RoPE layout), naming why."""
        outer, rope_style = getattr(config, "num_outer_layers", 0), getattr(config, "rope_style", "rotate_half")
        if outer and cls.outer_layers_refused:
            raise LoopKVError(f"KV method {cls.name or cls.__name__!r} does not serve models with non-looped "
                              f"layers (this {config.model_type} model has {outer}): {cls.outer_layers_refused}")
        if rope_style not in cls.rope_styles:
            raise LoopKVError(f"KV method {cls.name or cls.__name__!r} does not handle {rope_style} RoPE "
                              f"(this {config.model_type} model's); use 'full'")

    def __init__(self, config):
        self.check_serves(config)
        self.num_outer_layers = getattr(config, "num_outer_layers", 0)
        rope_style = getattr(config, "rope_style", "rotate_half")
        self.num_loops = config.total_ut_steps
        self.num_layers = config.num_hidden_layers
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.rotary = Rotary(config.head_dim, config.rope_theta, rope_style)
        self._seen_tokens = 0
        self._pending = 0
        # RoPE positions of the cached tokens (B, S) and of the tokens of the running forward;
        # bookkeeping for methods that rotate on read, not K/V payload
        self.positions: torch.Tensor | None = None
        self._new_positions: torch.Tensor | None = None
        # cos/sin tables per positions tensor, reused across the T*D calls of one forward
        self._rope_tables: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._rope_table: tuple[torch.Tensor, torch.Tensor] | None = None    # rows by position, grown on demand
        # the non-looped layers' post-RoPE K and V, every token exact (empty for Ouro)
        self.outer_keys: list[torch.Tensor | None] = [None] * self.num_outer_layers
        self.outer_values: list[torch.Tensor | None] = [None] * self.num_outer_layers

    @property
    def is_linear(self) -> list[bool]:
        return [False]

    # -- the forward protocol -------------------------------------------------------------
    def begin_forward(self, positions: torch.Tensor) -> None:
        """positions (B, L): RoPE positions of the new tokens (shared by all their loops)."""
        self._pending = positions.shape[1]
        self._new_positions = positions
        self._rope_tables = {}

    def attend(self, loop: int, layer: int, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """q (B, H, L, d_head) with RoPE; k, v (B, H_kv, L, d_head) pre-RoPE; mask boolean
        (B, 1, L, S) over cache order, or None for plain causal attention among the new tokens
        (no past, no padding). Returns (B, H, L, d_head)."""
        keys, values = self.update(loop, layer, positions, k, v)
        return attention(q, keys, values, mask)

    def read_query(self, loop: int, layer: int, positions: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The query the method's attention scores with, from the model's RoPE'd q: q itself, unless the
        method serves a changed attention (decoupled RoPE); the teacher-forced view reads it too."""
        return q

    @abstractmethod
    def update(self, loop: int, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """k, v (B, H_kv, L, d_head), pre-RoPE, for the new tokens at (loop, layer).

        Returns (keys, values) of shape (B, H_kv, S, d_head) over all S = cached + new tokens,
        keys with RoPE applied at each token's position.
        """

    def attend_outer(self, layer: int, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """`attend` for non-looped layer `layer` (in range(num_outer_layers)), run once per token."""
        keys, values = self.update_outer(layer, positions, k, v)
        return attention(q, keys, values, mask)

    def update_outer(self, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """`update` for non-looped layer `layer`: its K/V kept exact, whatever the method."""
        held = 0 if self.outer_keys[layer] is None else self.outer_keys[layer].shape[2]
        if held != self.get_seq_length():   # a layer missing cached tokens would attend as if they were not there
            raise LoopKVError(f"{self.name or type(self).__name__} cache: non-looped layer {layer} holds K/V of "
                              f"{held} tokens, the cache {self.get_seq_length()}")
        self.outer_keys[layer] = concat(self.outer_keys[layer], self.rope(positions, k))
        self.outer_values[layer] = concat(self.outer_values[layer], v)
        return self.outer_keys[layer], self.outer_values[layer]

    def expect_loops(self, loops: int) -> None:
        """The next forward runs `loops` loops (a model whose count is a forward argument says so
        before begin_forward): the cache's stores are laid out for num_loops, so any other is refused."""
        if loops != self.num_loops:
            raise LoopKVError(f"a {self.name or type(self).__name__} cache is built for {self.num_loops} loops "
                              f"(the model config's), this forward runs {loops}: set the config's loop count "
                              f"(Huginn: mean_recurrence) to the number of steps to serve")

    def append(self, loop: int, layer: int, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the new tokens' K/V at (loop, layer) without reading the past back: filling a cache
        to a length (capacity probes, footprints). By default `update`, its result dropped; a method
        whose read builds large transients (LLA decodes every past token) stores without them."""
        self.update(loop, layer, positions, k, v)

    def end_forward(self) -> None:
        self.positions = concat(self.positions, self._new_positions, dim=1)
        self._new_positions = None
        self._seen_tokens += self._pending
        self._pending = 0

    # -- queries --------------------------------------------------------------------------
    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._seen_tokens

    @abstractmethod
    def loop_bytes_per_token(self, dtype: torch.dtype) -> int:
        """Persistent bytes per token of the looped layers (all loops, layers, heads): the method's formula."""

    @abstractmethod
    def loop_tensors(self) -> list[torch.Tensor]:
        """Every tensor the method keeps between forwards for the looped layers."""

    def every_loop_bytes_per_token(self, dtype: torch.dtype) -> int:
        """The teacher's looped-layer bytes per token: K and V of every loop, layer and KV head exact
        (a method storing that much, e.g. a full-memory read path, states it with this)."""
        element = torch.tensor([], dtype=dtype).element_size()
        return 2 * self.num_loops * self.num_layers * self.num_kv_heads * self.head_dim * element

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        """Persistent cache bytes per token: the method's looped layers + 2 * O * H_kv * d_head * bytes(dtype)
        of the non-looped ones (O = num_outer_layers, stored exact)."""
        element = torch.tensor([], dtype=dtype).element_size()
        return self.loop_bytes_per_token(dtype) + 2 * self.num_outer_layers * self.num_kv_heads * self.head_dim * element

    def cached_tensors(self) -> list[torch.Tensor]:
        """Every tensor the cache keeps between forwards (for measured byte counts)."""
        return self.loop_tensors() + [t for t in self.outer_keys + self.outer_values if t is not None]

    def allocated_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.cached_tensors())

    def reconstruct(self, loop: int, layer: int, trace) -> tuple[torch.Tensor, torch.Tensor]:
        """The teacher-forced view of the method: given every token's exact pre-RoPE K/V at every
        (loop, layer) (`trace.kv(kind, loop, layer)`, each (B, H_kv, L, d_head)), the pre-RoPE
        (K, V) of all L tokens as this method would hand them to a later token at (loop, layer).
        Differentiable in the method's parameters; used for distillation (cache/teacher_forced.py)."""
        raise NotImplementedError(f"{type(self).__name__} has no teacher-forced view")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Between forwards, row i of the cache becomes a copy of row beam_idx[i] (rows may repeat or
        go: beam search, or one prefilled context serving several continuations). Every tensor the
        cache holds outside `bookkeeping` is per-row payload, batch first (what the byte counts say
        too), so all of it is selected, in nested lists, dicts and caches; of the bookkeeping, the
        cached tokens' positions. A payload tensor whose first axis is not the batch is refused,
        naming it: selecting it would be silently wrong."""
        if self._new_positions is not None:
            raise LoopKVError("a cache's rows are selected between forwards, not during one")
        if self.positions is None:   # nothing cached yet: no rows to select
            return
        rows = self.positions.shape[0]
        index = beam_idx.to(self.positions.device)
        if index.ndim != 1 or (len(index) and (int(index.min()) < 0 or int(index.max()) >= rows)):
            raise LoopKVError(f"rows to select must be a 1-d index into the cache's {rows} rows")
        skip, nested = type(self).bookkeeping, []
        # every selection is made (and a bad tensor refused) before anything is changed
        selected = {name: select_rows(value, index, rows, f"{type(self).__name__}.{name}", nested)
                    for name, value in vars(self).items() if name not in skip}
        for cache in nested:
            cache.reorder_cache(index)
        for name, value in selected.items():
            setattr(self, name, value)
        self.positions = self.positions.index_select(0, index)

    @property
    def past_mask_by_key(self) -> bool:
        """Whether a read takes a past token's visibility from the last query's row only (the same for
        every new token): then a forward of several tokens over a past cannot apply a sliding window."""
        return False

    def keep_tokens(self, index: torch.Tensor) -> None:
        """Between forwards, keep only the cached tokens at `index` (cache slots, increasing): the
        others are freed (token eviction, cache/eviction.py). Methods say where their per-token
        payload is (`token_stores`); one that does not cannot evict."""
        if not self.token_stores:
            raise LoopKVError(f"KV method {self.name or type(self).__name__!r} cannot evict tokens "
                              f"(it states no per-token stores)")
        self._check_kept(index)
        index = index.to(self.positions.device)   # once, not once per stored tensor (T*D of them)
        for name, dim in self.token_stores.items():
            setattr(self, name, select_tokens(getattr(self, name), dim, index))
        self._keep_base_tokens(index)

    def _check_kept(self, index: torch.Tensor) -> None:
        if self._new_positions is not None:
            raise LoopKVError("tokens are evicted between forwards, not during one")
        held = self.get_seq_length()
        if index.ndim != 1 or (len(index) and (int(index.min()) < 0 or int(index.max()) >= held)) \
                or bool((index[1:] <= index[:-1]).any()):
            raise LoopKVError(f"tokens to keep must be increasing cache slots below {held}")

    def _keep_base_tokens(self, index: torch.Tensor) -> None:
        """The base class's per-token state: the non-looped layers' K/V, positions, the count."""
        self.outer_keys = select_tokens(self.outer_keys, 2, index)
        self.outer_values = select_tokens(self.outer_values, 2, index)
        if self.positions is not None:
            self.positions = self.positions.index_select(1, index.to(self.positions.device))
        self._seen_tokens = len(index)

    # -- helpers for subclasses -----------------------------------------------------------
    def rope(self, positions: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Rotate k (B, H, L, d) to `positions` (B, L)."""
        return self.rotary.apply(k, *self.rope_tables(positions, k.dtype))

    def rope_tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (B, 1, L, d) of `positions`, reused across the T*D calls of one forward."""
        entry = self._rope_tables.get(id(positions))
        if entry is None or entry[0] is not positions or entry[1].dtype != dtype:
            entry = (positions, *self.rotary.cos_sin(positions, dtype))
            self._rope_tables[id(positions)] = entry
        return entry[1], entry[2]

    def rope_table(self, rows: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (P, d) float32 with row p for position p, P >= `rows`: one small table serves
        every batch row and every step (grown by doubling), where per-positions tables are B*S rows
        rebuilt every forward."""
        table = self._rope_table
        if table is None or table[0].shape[0] < rows or table[0].device != device:
            size = max(rows, 2 * table[0].shape[0] if table is not None else 256)
            cos, sin = self.rotary.cos_sin(torch.arange(size, device=device)[None], torch.float32)
            table = self._rope_table = (cos[0, 0], sin[0, 0])
        return table

    def entry(self, loop: int, layer: int) -> int:
        """Index of a (loop, layer) entry, Ouro's convention: loop * num_layers + layer."""
        return loop * self.num_layers + layer


def attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Scaled dot-product attention of q over stored K/V (grouped heads allowed); mask as in `attend`."""
    return F.scaled_dot_product_attention(
        q, keys.to(q.dtype), values.to(q.dtype), attn_mask=mask, is_causal=mask is None,
        enable_gqa=q.shape[1] != keys.shape[1],
    )


def select_tokens(store, dim: int, index: torch.Tensor):
    """`store` (a tensor, None, or lists / dicts of them) with only the tokens at `index` along `dim`."""
    if store is None:
        return None
    if isinstance(store, torch.Tensor):
        return store.index_select(dim, index.to(store.device))
    if isinstance(store, list):
        return [select_tokens(t, dim, index) for t in store]
    if isinstance(store, dict):
        return {k: select_tokens(t, dim, index) for k, t in store.items()}
    raise TypeError(f"a token store holds tensors in lists or dicts, got {type(store).__name__}")


def select_rows(store, index: torch.Tensor, rows: int, where: str, nested: list):
    """`store` with its batch rows at `index` (reorder_cache): tensors (batch first) in lists, tuples
    and dicts; a nested cache is appended to `nested`, for the caller to reorder; modules (a codec's
    weights) and plain values are not per row and stay. A tensor that is not per row must be listed in
    its class's bookkeeping: one whose first axis is not the batch is refused here, but one that only
    happens to have as many rows as the batch cannot be told apart."""
    if isinstance(store, torch.Tensor):
        if store.ndim == 0 or store.shape[0] != rows:
            raise LoopKVError(f"{where}: a payload tensor of shape {tuple(store.shape)} is not batch-first over "
                              f"{rows} rows; list it in the class's bookkeeping or select it in its reorder_cache")
        return store.index_select(0, index.to(store.device))
    if isinstance(store, (list, tuple)):
        return type(store)(select_rows(t, index, rows, f"{where}[{i}]", nested) for i, t in enumerate(store))
    if isinstance(store, dict):
        return {k: select_rows(t, index, rows, f"{where}[{k!r}]", nested) for k, t in store.items()}
    if isinstance(store, LoopCache):
        nested.append(store)
    return store


def concat(old: torch.Tensor | None, new: torch.Tensor, dim: int = 2) -> torch.Tensor:
    """Append `new` to a stored tensor that may not exist yet (dim 2 = tokens in (B, H, S, d))."""
    return new if old is None else torch.cat([old, new], dim=dim)


def overwrite_tail(stores: list, i: int, new: torch.Tensor) -> None:
    """Write `new` (B, H, L, d) over the last L tokens of stores[i] (a full-memory read path's end of
    forward: the new tokens' exact K/V, read by their own forward, become what later tokens read)."""
    store = stores[i]
    if store.shape[2] == new.shape[2]:   # the first forward: the store may be the caller's tensor itself
        stores[i] = new.to(store.dtype)
    else:                                # a tensor of our own (a cat): its tail, in place
        store[:, :, store.shape[2] - new.shape[2]:] = new.to(store.dtype)
