"""Token eviction (cache/eviction.py) over every method: freeing evicted tokens changes nothing a
masked cache that keeps them all would compute (a reference wrapper building its mask by loops over
positions, freeing nothing); the cache holds exactly the sinks and the window, and its bytes are the
method's per token times the held-slot formula, counted on the allocated tensors."""
import pytest
import torch

from cache_helpers import held_bytes, stream, stream_padded
from loopkv.eval.generation import left_pad
from loopkv.cache.eviction import EvictingCache, held_slots
from loopkv.cache.kv_quant import QuantCache
from loopkv.errors import LoopKVError
from method_checks import FORWARD, cases, served, teacher, tolerance

SINKS, WINDOW = 2, 5


class MaskedReference:
    """The eviction rule as a mask only: every token stays in the wrapped cache; query at position q
    reads key at position p iff p < sinks or q - p <= window (one comparison per pair, in loops)."""

    def __init__(self, inner, sinks, window):
        self.inner, self.sinks, self.window = inner, sinks, window
        self.seen = None

    def __getattr__(self, name):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def begin_forward(self, positions):
        self.new = positions
        self.inner.begin_forward(positions)

    def end_forward(self):
        self.seen = self.new if self.seen is None else torch.cat([self.seen, self.new], dim=1)
        self.inner.end_forward()

    def _mask(self, mask, n):
        keys = self.new if self.seen is None else torch.cat([self.seen, self.new], dim=1)
        rule = torch.zeros(keys.shape[0], 1, n, keys.shape[1], dtype=torch.bool)
        for b in range(keys.shape[0]):
            for i in range(n):
                for j in range(keys.shape[1]):
                    q, p = int(self.new[b, i]), int(keys[b, j])
                    rule[b, 0, i, j] = p < self.sinks or q - p <= self.window
        causal = torch.ones(n, n, dtype=torch.bool).tril()[None, None] if mask is None else mask
        return causal & rule

    def attend(self, loop, layer, positions, q, k, v, mask):
        return self.inner.attend(loop, layer, positions, q, k, v, self._mask(mask, q.shape[2]))

    def attend_outer(self, layer, positions, q, k, v, mask):
        return self.inner.attend_outer(layer, positions, q, k, v, self._mask(mask, q.shape[2]))

    def attend_melt(self, loop, layer, positions, q, kv_melt, kv_base, mask):
        return self.inner.attend_melt(loop, layer, positions, q, kv_melt, kv_base, self._mask(mask, q.shape[2]))


def tokens(batch=2, n=16, seed=0):
    return torch.randint(3, 61, (batch, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family,name,read_path", cases("bytes"))
def test_evicting_equals_masking_everything_kept(family, name, read_path):
    model, factory, _ = served(name, read_path, teacher(family=family))
    ids = tokens()
    evicted = stream(model, EvictingCache(factory(), SINKS, WINDOW), ids, prefill=6, **FORWARD[family])
    masked = stream(model, MaskedReference(factory(), SINKS, WINDOW), ids, prefill=6, **FORWARD[family])
    plain = stream(model, factory(), ids, prefill=6, **FORWARD[family])
    torch.testing.assert_close(evicted, masked, atol=tolerance(model, read_path, family), rtol=0)
    # up to sinks + window + 1 tokens nothing is evicted; past them the rule changes the output
    within = SINKS + WINDOW + 1
    torch.testing.assert_close(evicted[:, :within], plain[:, :within], atol=tolerance(model, read_path, family), rtol=0)
    assert (evicted[:, within:] - plain[:, within:]).abs().max() > 1e-3


@pytest.mark.parametrize("family,name,read_path", cases("bytes"))
def test_holds_the_sinks_and_the_window_and_their_bytes(family, name, read_path):
    model, factory, _ = served(name, read_path, teacher(family=family))
    batch, n = 2, 16   # prefill 4 then decode: whole kv_quant key groups of 4 (its test granule)
    cache = EvictingCache(factory(), SINKS, WINDOW)
    stream(model, cache, tokens(batch, n), prefill=4, **FORWARD[family])
    granule = cache.granule
    if granule == 1:   # the sinks (positions 0, 1) and the last five
        assert cache.inner.positions[0].tolist() == [0, 1, 11, 12, 13, 14, 15]
    else:              # kv_quant (G = 4): slots 0-3 (the sinks' group), 8-15 (the window's groups)
        assert granule == 4 and cache.inner.positions[0].tolist() == [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15]
    assert cache.held == held_slots(n, SINKS, WINDOW, granule) == len(cache.inner.positions[0])
    assert cache.get_seq_length() == n and cache.inner.get_seq_length() == cache.held
    per_token = cache.bytes_per_token(model.dtype)
    assert held_bytes(cache.inner) == per_token * batch * cache.held
    assert cache.held_bytes(n, model.dtype) == per_token * cache.held


def test_held_slots_by_hand():
    assert [held_slots(n, 4, 8) for n in (0, 5, 12, 13, 100)] == [0, 5, 12, 12, 12]
    # G = 4, sinks 2, window 5, n = 16: groups 0 (sinks) and 2-3 (window 11..15, group 2 holds 11) kept
    assert held_slots(16, 2, 5, 4) == 12
    assert held_slots(18, 2, 5, 4) == 10   # window 13..17: groups 0, 3 and 4 (incomplete); 1 and 2 freed
    assert held_slots(7, 2, 5, 4) == 7


@pytest.mark.parametrize("name,read_path", [("full", None), ("lla", "latent"), ("kv_quant", None)])
def test_rows_of_a_padded_batch_evict_as_alone(name, read_path):
    model, factory, _ = served(name, read_path, teacher())
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (9, 4, 7)]
    continuations = [torch.randint(3, 61, (6,), generator=g).tolist() for _ in prompts]
    batched = stream_padded(model, EvictingCache(factory(), SINKS, WINDOW), prompts, continuations)
    for i, (p, c) in enumerate(zip(prompts, continuations)):
        alone = stream_padded(model, EvictingCache(factory(), SINKS, WINDOW), [p], [c])[0]
        reference = stream_padded(model, MaskedReference(factory(), SINKS, WINDOW), [p], [c])[0]
        torch.testing.assert_close(alone, reference, atol=1e-8, rtol=0)
        if name != "kv_quant":   # kv_quant's key groups depend on the batch's padding (its known failure)
            torch.testing.assert_close(batched[i], alone, atol=1e-8, rtol=0)


@pytest.mark.parametrize("name,read_path", [("full", None), ("lla", "latent")])
def test_a_prefilled_row_selected_into_several_evicts_as_each_prefilled(name, read_path):
    """reorder_cache through the wrapper: its record of which held slots are real follows the rows."""
    model, factory, _ = served(name, read_path, teacher())
    g = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (9, 4, 7)]
    index = [2, 0, 2, 1]
    continuations = [torch.randint(3, 61, (6,), generator=g).tolist() for _ in index]
    ids, mask = left_pad(prompts, model.config.pad_token_id or 0)   # as stream_padded pads
    cache = EvictingCache(factory(), SINKS, WINDOW)
    with torch.no_grad():
        prefill = model(ids, attention_mask=mask, cache=cache).logits
        rows = torch.tensor(index)
        cache.reorder_cache(rows)
        mask = mask.index_select(0, rows)
        shared = [[prefill[i, -1:]] for i in index]
        for j in range(6):
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            step = model(torch.tensor([[c[j]] for c in continuations]), attention_mask=mask, cache=cache).logits
            for row in range(len(index)):
                shared[row].append(step[row])
    assert cache.held < ids.shape[1] + 6   # the continuation evicted
    direct = stream_padded(model, EvictingCache(factory(), SINKS, WINDOW), [prompts[i] for i in index], continuations)
    for row, i in enumerate(index):
        torch.testing.assert_close(torch.cat(shared[row]), direct[row][len(prompts[i]) - 1:], atol=1e-8, rtol=0)


def test_bad_evictions_are_refused():
    model, factory, _ = served("kv_quant", None, teacher())
    cache = factory()
    stream(model, cache, tokens(1, 9), prefill=9)
    assert isinstance(cache, QuantCache) and cache.get_seq_length() == 9
    with pytest.raises(LoopKVError, match="whole key groups"):
        cache.keep_tokens(torch.tensor([0, 1, 4, 5, 6, 7, 8]))   # half of group 0
    with pytest.raises(LoopKVError, match="whole key groups"):
        cache.keep_tokens(torch.tensor([0, 1, 2, 3]))            # the waiting key at slot 8
    with pytest.raises(LoopKVError, match="increasing cache slots"):
        cache.keep_tokens(torch.tensor([4, 0]))
    with pytest.raises(ValueError, match="window"):
        EvictingCache(factory(), 4, 0)
    # LLA's fused read takes one visibility per past key: a several-token forward over a past with a
    # window sliding inside it is refused; one token at a time is what it serves
    model, factory, _ = served("lla", "fused", teacher())
    cache = EvictingCache(factory(), 1, 2)
    with torch.no_grad():
        model(tokens(1, 4), cache=cache)
        with pytest.raises(LoopKVError, match="cannot slide a window"):
            model(tokens(1, 4, seed=1), cache=cache)


@pytest.mark.parametrize("name,read_path", [("full", None), ("lla", "latent"), ("kv_quant", None), ("mla_head", None)])
def test_several_tokens_a_forward_over_an_evicted_past(name, read_path):
    """Chunks of 6, 3, 4, 1, 2 tokens: each forward's queries slide the window inside it, over a past
    the cache has already freed."""
    model, factory, _ = served(name, read_path, teacher())
    ids = tokens(2, 16)

    def chunked(cache):
        out, start = [], 0
        with torch.no_grad():
            for size in (6, 3, 4, 1, 2):
                out.append(model(ids[:, start:start + size], cache=cache).logits)
                start += size
        return torch.cat(out, 1)

    torch.testing.assert_close(chunked(EvictingCache(factory(), SINKS, WINDOW)),
                               chunked(MaskedReference(factory(), SINKS, WINDOW)), atol=1e-8, rtol=0)


def test_kv_quant_with_no_sinks_frees_every_whole_group():
    """sinks 0 and a window shorter than a key group (4): every complete group is freed at some steps."""
    model, factory, _ = served("kv_quant", None, teacher())
    ids = tokens(1, 14)
    cache = EvictingCache(factory(), 0, 3)
    evicted = stream(model, cache, ids, prefill=5)
    masked = stream(model, MaskedReference(factory(), 0, 3), ids, prefill=5)
    torch.testing.assert_close(evicted, masked, atol=1e-8, rtol=0)
    assert cache.held == held_slots(14, 0, 3, 4) == 6   # group 2 (8-11, the window's first) and 12-13 waiting
