"""The tokenizer: a byte-level BPE trained on the train split, or a pretrained one copied in."""
from __future__ import annotations

from pathlib import Path

from loopkv.data.options import require
from loopkv.data.progress import progress
from loopkv.errors import LoopKVError

SECTION = "data.tokenizer"
# fixed ids 0/1/2, the pad/bos/eos ids of Ouro's config, so a model config can state them up front
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")
_BYTE_ALPHABET = 256
_LINES_PER_CHUNK = 256


def train_tokenizer(cfg: dict, train_txt, out_dir) -> dict:
    """Build the tokenizer `data.tokenizer` asks for, save it to out_dir (save_pretrained layout), return stats."""
    kind = require(cfg, "kind", SECTION, str)
    train_txt = Path(train_txt)
    if not train_txt.is_file():
        raise LoopKVError(f"train split not found: {train_txt} (build the corpus first)")
    if kind == "bpe":
        tokenizer = _train_bpe(cfg, train_txt)
    elif kind == "pretrained":
        tokenizer = _load_pretrained(cfg)
    else:
        raise LoopKVError(f"{SECTION}.kind must be 'bpe' or 'pretrained', got {kind!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out_dir))
    return _stats(kind, tokenizer, train_txt)


def load_tokenizer(path):
    """The saved tokenizer exactly as its tokenizer.json defines it, left-padded (generation batches).

    Read as a PreTrainedTokenizerFast, never through AutoTokenizer: under transformers 5, AutoTokenizer
    on a checkpoint whose tokenizer_config names a slow class (GPT2Tokenizer, as Ouro's does) rebuilds
    that class's own pre-tokenizer and drops tokenizer.json's (e.g. its digit splitting)."""
    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise LoopKVError(f"no tokenizer.json in {path} (loopkv reads tokenizers-format tokenizers: "
                          "`loopkv data-tokenizer` writes one, real Ouro checkpoints ship one)")
    tokenizer = _fast_tokenizer(path)
    tokenizer.padding_side = "left"
    return tokenizer


# the files of a tokenizer directory transformers parses, and what each must hold at least
_TOKENIZER_FILES = {"tokenizer.json": {"model": {}}, "tokenizer_config.json": {}, "special_tokens_map.json": {}}


def _fast_tokenizer(path: Path):
    from transformers import PreTrainedTokenizerFast

    from loopkv.utils.checked_io import read_json

    for name, fields in _TOKENIZER_FILES.items():   # a truncated or foreign file: named, with its line
        if name == "tokenizer.json" or (path / name).exists():
            read_json(path / name, "tokenizer file", fields=fields)
    try:
        return PreTrainedTokenizerFast.from_pretrained(str(path))
    except Exception as e:   # tokenizers / transformers raise many types (KeyError, pyo3 errors) on foreign files
        raise LoopKVError(f"tokenizer {path / 'tokenizer.json'} cannot be loaded ({type(e).__name__}: {e}); "
                          "the file is corrupt or not a tokenizers-format tokenizer") from e


def _train_bpe(cfg: dict, train_txt: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    minimum = _BYTE_ALPHABET + len(SPECIAL_TOKENS)
    vocab_size = require(cfg, "vocab_size", SECTION, int, minimum=minimum)
    tokenizer = Tokenizer(models.BPE())
    # digits first, one per pre-token, so no merge ever joins digits: arithmetic sees one token per digit
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    # a prompt starts with <bos>, as the tiny teacher is trained (data/encoding.py: encode_prompt adds
    # whatever the tokenizer's own post-processor adds; a real checkpoint's may add nothing)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", SPECIAL_TOKENS.index("<bos>"))])
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),         # listed first, so they take ids 0, 1, 2
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable: no <unk> needed
        show_progress=False,
    )
    # The BPE trainer breaks count ties by pair order, not by thread scheduling: training twice gives an
    # identical tokenizer.json whatever RAYON_NUM_THREADS is (checked with 1, 2 and 8 threads and in the tests).
    # Chunks end at line ends so no word is cut in two.
    tokenizer.train_from_iterator(_line_chunks(train_txt), trainer)
    if [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] != list(range(len(SPECIAL_TOKENS))):
        raise RuntimeError("BPE training did not give the special tokens ids 0/1/2")
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
        padding_side="left",
    )


def _load_pretrained(cfg: dict):
    path = cfg.get("path")
    if not path or not Path(str(path)).is_dir():
        raise LoopKVError(f"{SECTION}.path must name an existing tokenizer directory when {SECTION}.kind is "
                          f"'pretrained', got {path!r}")
    try:
        tokenizer = load_tokenizer(path)   # as its tokenizer.json defines it (see load_tokenizer)
    except LoopKVError as e:
        raise LoopKVError(f"{SECTION}.path: {e}") from e
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        # left-padded batches need a pad id; its positions are masked, so reusing eos is harmless
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _line_chunks(path: Path):
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for start in range(0, len(lines), _LINES_PER_CHUNK):
        yield "".join(lines[start:start + _LINES_PER_CHUNK])


def _stats(kind: str, tokenizer, train_txt: Path) -> dict:
    chars = tokens = 0
    chunks = list(_line_chunks(train_txt))
    for chunk in progress(chunks, desc="count train tokens", unit="chunk"):
        chars += len(chunk)
        tokens += len(tokenizer(chunk, add_special_tokens=False)["input_ids"])
    return {
        "kind": kind,
        "vocab_size": len(tokenizer),
        "special_token_ids": {name: tokenizer.convert_tokens_to_ids(name)
                              for name in (tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token)
                              if name is not None},
        "train_chars": chars,
        "train_tokens": tokens,
        "chars_per_token": round(chars / max(tokens, 1), 4),
    }
