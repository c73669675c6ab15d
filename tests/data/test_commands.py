"""The data commands, end to end through argparse, as the Snakemake rules call them: each gets its
declared slice of the config (loopkv.jobs), nested as in the config."""
import argparse
import json

import pytest

from loopkv.data import commands
from loopkv.errors import LoopKVError
from loopkv.utils.atomic import read_jsonl

TASK_CFGS = {
    "passkey": {"train_examples": 3, "eval_trials": 1, "train_lengths": [160], "eval_lengths": [160, 240],
                "key_digits": 5, "filler": "corpus"},
    "arithmetic": {"train_examples": 20, "eval_examples": 5, "min_steps": 2, "max_steps": 4, "max_operand": 9,
                   "max_value": 99, "ops_per_line": 1},
    "cloze": {"eval_examples": 3, "num_choices": 4, "context_words": 48, "continuation_words": 8},
}


def run(*argv):
    parser = argparse.ArgumentParser(prog="loopkv")
    commands.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


def task_slice(name, cfg, seed=3):
    return json.dumps({"seed": seed, "data": {"tasks": {name: cfg}}})


def manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_three_commands_end_to_end(corpus_cfg, train_slice, tmp_path):
    corpus, tok = tmp_path / "corpus", tmp_path / "tokenizer"
    corpus_slice = {"seed": 3, "data": {"corpus": corpus_cfg}}
    assert run("data-corpus", "--cfg", json.dumps(corpus_slice), "--out", corpus) == 0
    assert sorted(p.name for p in corpus.iterdir()) == ["manifest.json", "test.txt", "train.txt", "val.txt"]
    m = manifest(corpus)
    assert m["provenance"]["seed"] == 3 and m["provenance"]["config"] == corpus_slice
    assert m["stats"]["splits"]["test"]["blocks"] > 0
    assert len(m["provenance"]["inputs"]) == 42
    assert all(len(i["sha256"]) == 64 for i in m["provenance"]["inputs"].values())

    # a tiny tokenizer on a slice keeps the test fast
    tok_cfg = {"kind": "bpe", "vocab_size": 300, "path": None}
    assert run("data-tokenizer", "--cfg", json.dumps({"data": {"tokenizer": tok_cfg}}), "--train", train_slice, "--out", tok) == 0
    m = manifest(tok)
    assert m["stats"]["vocab_size"] == 300 and m["stats"]["train_tokens"] > 0
    assert m["provenance"]["inputs"]["train"]["path"] == str(train_slice)
    assert (tok / "tokenizer.json").is_file()

    for name, cfg in TASK_CFGS.items():
        out = tmp_path / "tasks" / name
        assert run("data-task", name, "--cfg", task_slice(name, cfg), "--corpus", corpus,
                   "--tokenizer", tok, "--out", out) == 0
        m = manifest(out)
        assert m["stats"]["task"] == name
        assert m["provenance"]["config"] == {"seed": 3, "data": {"tasks": {name: cfg}}, "task": name}
        assert set(m["provenance"]["inputs"]) == {"corpus", "tokenizer"}
        assert len(read_jsonl(out / "test.jsonl")) == m["stats"]["splits"]["test"]["examples"]


def test_output_dir_is_replaced_whole_and_only_on_success(corpus_dir, tokenizer_dir, tmp_path):
    out = tmp_path / "arith"
    out.mkdir()
    (out / "stale.txt").write_text("left over from an old run")
    run("data-task", "arithmetic", "--cfg", task_slice("arithmetic", TASK_CFGS["arithmetic"], 1), "--out", out)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.jsonl", "train.jsonl"]

    bad = dict(TASK_CFGS["passkey"], eval_lengths=[10])
    with pytest.raises(LoopKVError, match=r"data\.tasks\.passkey\.eval_lengths"):
        run("data-task", "passkey", "--cfg", task_slice("passkey", bad, 1), "--corpus", corpus_dir,
            "--tokenizer", tokenizer_dir, "--out", tmp_path / "pk")
    assert not (tmp_path / "pk").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temp dirs left


def test_unknown_task_is_a_user_error(tmp_path):
    with pytest.raises(LoopKVError, match=r"data\.tasks"):
        run("data-task", "nope", "--cfg", task_slice("nope", {}, 1), "--out", tmp_path / "x")


def test_a_key_the_job_did_not_declare_is_refused_naming_it(corpus_cfg, tmp_path):
    # data-corpus declares seed and data.corpus: a slice without the seed cannot run it
    with pytest.raises(LoopKVError, match=r"data-corpus read config key 'seed'"):
        run("data-corpus", "--cfg", json.dumps({"data": {"corpus": corpus_cfg}}), "--out", tmp_path / "x")


def test_bad_json_is_rejected_by_argparse(tmp_path):
    with pytest.raises(SystemExit):
        run("data-corpus", "--cfg", "{not json", "--out", tmp_path / "x")
