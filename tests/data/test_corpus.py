import pytest

from loopkv.data.corpus import assign_splits, build_corpus, cut_blocks
from loopkv.errors import LoopKVError

SPLITS = ("train", "val", "test")


def _read(d):
    return {s: (d / f"{s}.txt").read_bytes() for s in SPLITS}


def test_same_seed_same_bytes_other_seed_other_split(corpus_dir, corpus_cfg, tmp_path):
    build_corpus(corpus_cfg, 7, tmp_path / "again")
    build_corpus(corpus_cfg, 8, tmp_path / "other")
    assert _read(tmp_path / "again") == _read(corpus_dir)
    assert _read(tmp_path / "other")["test"] != _read(corpus_dir)["test"]


def test_real_corpus_stats(corpus_dir, corpus_cfg, tmp_path):
    stats = build_corpus(corpus_cfg, 7, tmp_path / "c")
    splits = stats["splits"]
    assert sum(s["blocks"] for s in splits.values()) == stats["total_blocks"]
    for split in ("val", "test"):
        assert abs(splits[split]["fraction"] - 0.05) < 0.002
    assert splits["train"]["chars"] > 10 * splits["test"]["chars"]
    assert len(stats["sources"]) == 42
    assert all(len(s["sha256"]) == 64 for s in stats["sources"])
    assert not any(s["name"].endswith("_gut_f.txt") for s in stats["sources"])
    assert splits["train"]["chars"] == len((corpus_dir / "train.txt").read_text())


def test_splits_are_disjoint_and_cover_every_block(tmp_path):
    # unique lines and no blank lines, so each block can be recovered from the split files
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"line {i}\n" for i in range(1000)))
    cfg = {"sources": [], "text_files": [str(source)], "block_lines": 5, "val_fraction": 0.1, "test_fraction": 0.2}
    stats = build_corpus(cfg, 3, tmp_path / "out")
    blocks = {s: (tmp_path / "out" / f"{s}.txt").read_text().strip("\n").split("\n\n") for s in SPLITS}
    expected = cut_blocks(source.read_text(), 5)
    assert len(expected) == stats["total_blocks"] == 200
    assert sorted(b for s in SPLITS for b in blocks[s]) == sorted(expected)
    assert (len(blocks["val"]), len(blocks["test"]), len(blocks["train"])) == (20, 40, 140)
    # each split keeps source order
    for s in SPLITS:
        assert blocks[s] == sorted(blocks[s], key=expected.index)


def test_assign_splits_is_a_seeded_partition():
    a = assign_splits(101, 0.05, 0.1, seed=1)
    assert a == assign_splits(101, 0.05, 0.1, seed=1)
    assert a != assign_splits(101, 0.05, 0.1, seed=2)
    assert sorted(a["train"] + a["val"] + a["test"]) == list(range(101))
    assert (len(a["val"]), len(a["test"])) == (5, 10)


def test_cut_blocks_trims_blank_edges():
    assert cut_blocks("a\nb\n\nc\nd\n\n\n", 2) == ["a\nb", "c", "d"]


@pytest.mark.parametrize("key,value", [("val_fraction", 0.6), ("block_lines", 0), ("test_fraction", "x")])
def test_bad_config_names_the_key(corpus_cfg, tmp_path, key, value):
    cfg = dict(corpus_cfg, **{key: value})
    if key == "val_fraction":
        cfg["test_fraction"] = 0.5
    with pytest.raises(LoopKVError, match=r"data\.corpus\."):
        build_corpus(cfg, 1, tmp_path)
