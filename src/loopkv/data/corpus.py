"""Build the text corpus: clean the source files, cut them into blocks, and split blocks into train/val/test."""
from __future__ import annotations

import random
from pathlib import Path

from loopkv.data.options import require
from loopkv.data.progress import progress
from loopkv.data.sources import read_source, resolve_sources
from loopkv.errors import LoopKVError
from loopkv.utils.provenance import file_sha256
from loopkv.utils.seeding import derive_seed

SPLITS = ("train", "val", "test")
SECTION = "data.corpus"


def build_corpus(cfg: dict, seed: int, out_dir) -> dict:
    """Write out_dir/{train,val,test}.txt (blocks joined by a blank line) and return their stats."""
    block_lines = require(cfg, "block_lines", SECTION, int, minimum=1)
    val_fraction = require(cfg, "val_fraction", SECTION, float, minimum=0.0, maximum=1.0)
    test_fraction = require(cfg, "test_fraction", SECTION, float, minimum=0.0, maximum=1.0)
    if val_fraction + test_fraction >= 1.0:
        raise LoopKVError(f"{SECTION}.val_fraction + {SECTION}.test_fraction must be < 1 (train needs text)")

    blocks: list[str] = []
    sources = []
    for source in progress(resolve_sources(cfg), desc="corpus", unit="file"):
        text = read_source(source)
        file_blocks = cut_blocks(text, block_lines)
        blocks.extend(file_blocks)
        sources.append({"name": source.name, "path": str(source.path), "sha256": file_sha256(source.path),
                        "chars": len(text), "blocks": len(file_blocks)})

    assignment = assign_splits(len(blocks), val_fraction, test_fraction, derive_seed(seed, "corpus", "split"))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    split_stats = {}
    for split in SPLITS:
        chosen = [blocks[i] for i in assignment[split]]
        text = "\n\n".join(chosen) + "\n"
        (out_dir / f"{split}.txt").write_text(text, encoding="utf-8")
        split_stats[split] = {"chars": len(text), "blocks": len(chosen),
                              "fraction": round(len(chosen) / len(blocks), 4)}
    return {"splits": split_stats, "total_blocks": len(blocks), "block_lines": block_lines, "sources": sources}


def cut_blocks(text: str, block_lines: int) -> list[str]:
    """Consecutive runs of block_lines lines, with blank lines trimmed off their edges; empty runs dropped."""
    lines = text.split("\n")
    blocks = []
    for start in range(0, len(lines), block_lines):
        block = "\n".join(lines[start:start + block_lines]).strip("\n")
        if block.strip():
            blocks.append(block)
    return blocks


def assign_splits(n_blocks: int, val_fraction: float, test_fraction: float, seed: int) -> dict[str, list[int]]:
    """Block indices per split: exact counts from the fractions, chosen by a seeded shuffle, kept in source order."""
    n_val = _count(n_blocks, val_fraction)
    n_test = _count(n_blocks, test_fraction)
    if n_val + n_test >= n_blocks:
        raise LoopKVError(f"{SECTION}: only {n_blocks} blocks, too few for val/test/train splits; "
                          f"lower {SECTION}.block_lines or add text")
    order = list(range(n_blocks))
    random.Random(seed).shuffle(order)
    # source order inside each split keeps neighbouring blocks of a play together, so text reads naturally
    return {
        "val": sorted(order[:n_val]),
        "test": sorted(order[n_val:n_val + n_test]),
        "train": sorted(order[n_val + n_test:]),
    }


def _count(n: int, fraction: float) -> int:
    # a nonzero fraction always gets at least one block, so a small corpus still has a val/test split
    return max(1, round(n * fraction)) if fraction > 0 else 0
