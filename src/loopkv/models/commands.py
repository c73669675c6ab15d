"""Subcommand: random-checkpoint (a random-weight checkpoint in the published Ouro layout)."""
from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("random-checkpoint",
                       help="a random-weight checkpoint laid out as the published Ouro ones (paper-path smoke runs)",
                       description="Architecture and vocabulary from the config's model.arch and "
                                   "data.tokenizer.vocab_size (config files merge key by key, as Snakemake's "
                                   "--configfile); the BPE is trained on the corpus sources' text.")
    p.add_argument("--config", action="append", required=True, help="YAML config file(s), later ones override")
    p.add_argument("--out", required=True, help="checkpoint directory to write")
    p.add_argument("--text-chars", type=int, default=2_000_000, help="characters of source text the BPE learns from")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_random_checkpoint)


def merge(base: dict, over: dict) -> dict:
    """Config files merged key by key (nested mappings merged, any other value replaced)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _random_checkpoint(args) -> None:
    import yaml

    from loopkv.config import load_config
    from loopkv.data.sources import read_source, resolve_sources
    from loopkv.models.random_checkpoint import write_random_checkpoint
    from loopkv.utils.atomic import atomic_path

    raw: dict = {}
    for path in args.config:
        raw = merge(raw, yaml.safe_load(Path(path).read_text()) or {})
    config = load_config(raw, check_paths=False)
    texts, total = [], 0
    for source in resolve_sources(config["data"]["corpus"]):
        text = read_source(source)
        texts.append(text[:args.text_chars - total])
        total += len(texts[-1])
        if total >= args.text_chars:
            break
    with atomic_path(args.out) as tmp:
        write_random_checkpoint(tmp, config["model"]["arch"], config["data"]["tokenizer"]["vocab_size"], texts,
                                seed=args.seed, dtype=config["model"]["dtype"])
    print(f"wrote {args.out}")
