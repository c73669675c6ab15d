"""Shared by the cache tests: a small random looped model (Ouro, or Huginn with its prelude and coda),
streaming decode through a cache (unpadded or left-padded), a codec for codec methods, and the bytes a
cache object really holds."""
import torch

from loopkv.cache.base import LoopCache
from loopkv.eval.generation import left_pad
from loopkv.models import HuginnConfig, HuginnForCausalLM, OuroConfig, OuroForCausalLM


def small_model(loops=2, layers=2, heads=4, head_dim=12, seed=0):
    """Random weights with a large init, so continuations and cache errors are visible."""
    config = OuroConfig(vocab_size=61, hidden_size=heads * head_dim, num_hidden_layers=layers,
                        total_ut_steps=loops, num_attention_heads=heads, head_dim=head_dim,
                        intermediate_size=96, rope_theta=10000.0, max_position_embeddings=128,
                        initializer_range=0.3)
    torch.manual_seed(seed)
    return OuroForCausalLM(config).eval()


def small_huginn(steps=2, layers=2, heads=4, head_dim=12, seed=0, std=0.3):
    """A random Huginn: prelude 1, a core of `layers` run `steps` times, coda 1; weights drawn at `std`
    (its own init is tiny), so continuations and cache errors are visible."""
    config = HuginnConfig(vocab_size=64, n_embd=heads * head_dim, n_heads=heads, n_layers=layers + 2,
                          n_layers_in_prelude=1, n_layers_in_recurrent_block=layers, n_layers_in_coda=1,
                          mean_recurrence=steps, intermediate_size=96, block_size=128, rope_base=10000,
                          pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    model = HuginnForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.normal_(0.0, std)
            elif name.endswith("qk_bias"):
                p.normal_(0.0, std)
    return model


def stream(model, cache, tokens, prefill=3, **forward_kwargs):
    """Logits of a prefill of `prefill` tokens, then one token at a time through `cache`."""
    with torch.no_grad():
        pieces = [model(tokens[:, :prefill], cache=cache, **forward_kwargs).logits]
        for i in range(prefill, tokens.shape[1]):
            pieces.append(model(tokens[:, i:i + 1], cache=cache, **forward_kwargs).logits)
    return torch.cat(pieces, 1)


def stream_padded(model, cache, prompts, continuations, **forward_kwargs):
    """Per row, the logits at its real positions: its prompt in one left-padded prefill, then its
    continuation one token at a time through `cache` (all rows the same number of tokens), as a
    batched evaluation serves them. A list of (len(prompt) + len(continuation), V) tensors."""
    pad = getattr(model.config, "pad_token_id", None)
    pad = 0 if pad is None else pad   # a model with no pad token runs unpadded batches only
    ids, mask = left_pad(prompts, pad)
    rows = [[] for _ in prompts]
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, cache=cache, **forward_kwargs).logits
        for i, p in enumerate(prompts):
            rows[i].append(logits[i, ids.shape[1] - len(p):])
        for j in range(len(continuations[0])):
            step = torch.tensor([[c[j]] for c in continuations])
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            logits = model(step, attention_mask=mask, cache=cache, **forward_kwargs).logits
            for i in range(len(prompts)):
                rows[i].append(logits[i, -1:])
    return [torch.cat(r) for r in rows]


def random_codec(setting, config, seed=0, dtype=torch.float64):
    """An untrained codec of a codec method's setting: per group, down = up = random orthonormal
    columns (what an SVD initialisation is: a projection onto orthonormal directions) and a random
    mean. At full rank the basis is square, so the codec reconstructs every vector exactly."""
    from loopkv.cache.settings import new_codec

    codec = new_codec(setting, config).to(dtype)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for kind in ("k", "v"):
            mu, down, up = codec.params(kind)
            basis = torch.linalg.qr(torch.randn(down.shape, generator=g, dtype=torch.float64)).Q
            down.copy_(basis), up.copy_(basis)
            mu.copy_(0.1 * torch.randn(mu.shape, generator=g, dtype=torch.float64))
    return codec


def held_bytes(cache) -> int:
    """Bytes of every tensor storage reachable from a cache object's attributes (nested objects,
    lists, dicts; a nested cache with its own bookkeeping), skipping the attributes its class lists as
    `bookkeeping` and modules (a codec's weights are not per-token storage); each storage once, at
    its full size (a view keeps its whole base alive). Independent of the method's own
    `cached_tensors` and of its bytes formula."""
    storages, seen = {}, set()

    def visit(x, skip=()):
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        elif isinstance(x, torch.nn.Module) or isinstance(x, (str, bytes, int, float, bool, type(None))):
            return
        elif isinstance(x, dict):
            for value in x.values():
                visit(value)
        elif isinstance(x, (list, tuple, set, frozenset)):
            for value in x:
                visit(value)
        elif hasattr(x, "__dict__"):
            skip = type(x).bookkeeping if isinstance(x, LoopCache) else ()
            for name, value in vars(x).items():
                if name not in skip:
                    visit(value)

    visit(cache)
    return sum(storages.values())
