"""Files that are checked when read (issue 20): every reader of weights, checkpoints, calibration, the
tokenizer, task JSONL and JSON results reports a truncated, corrupt, foreign or incomplete file with a
message naming the file (and the line, field or tensor); through the CLI: exit status 2 and no
traceback, unless `loopkv --debug`."""
import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from loopkv.errors import LoopKVError
from loopkv.models.loading import load_teacher

WEIGHTS = "model.safetensors"


def run_cli(*args, debug=False, cwd=None):
    """`python -m loopkv ...` in a fresh process: (exit status, stderr)."""
    argv = [sys.executable, "-m", "loopkv", *(["--debug"] if debug else []), *map(str, args)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd)
    return out.returncode, out.stderr


def assert_clean_error(rc, stderr, *names):
    assert rc == 2, stderr
    assert "Traceback" not in stderr, stderr
    for name in names:
        assert str(name) in stderr, stderr


# -- model weights ---------------------------------------------------------------------------------
def checkpoint(tmp_path, reference_dir, edit=None, name="ouro"):
    """A copy of the reference checkpoint, its tensors passed through `edit(dict)` first."""
    out = tmp_path / name
    shutil.copytree(reference_dir, out)
    if edit is not None:
        tensors = load_file(out / WEIGHTS)
        edit(tensors)
        save_file(tensors, out / WEIGHTS, metadata={"format": "pt"})
    return out


def _data_span(raw, tensor):
    """Byte range of a tensor's data in a safetensors file's bytes."""
    n = int.from_bytes(raw[:8], "little")
    start, end = json.loads(raw[8:8 + n])[tensor]["data_offsets"]
    return 8 + n + start, 8 + n + end


def _drop(name):
    return lambda t: t.pop(name)


def _add(name, value):
    return lambda t: t.__setitem__(name, value)


def _nan_in(name):
    def edit(t):
        t[name] = t[name].clone()
        t[name].view(-1)[3] = float("nan")
    return edit


@pytest.mark.parametrize("edit, message", [
    (_drop("model.layers.0.mlp.up_proj.weight"), "missing tensor(s) model.layers.0.mlp.up_proj.weight"),
    (_drop("lm_head.weight"), "missing tensor(s) lm_head.weight"),   # untied: never silently re-initialised
    (_add("model.layers.0.extra.weight", torch.zeros(3)), "unexpected tensor(s) model.layers.0.extra.weight"),
    (_add("model.norm.weight", torch.ones(65)), "model.norm.weight is (65,) where the model expects (64,)"),
    (_nan_in("model.layers.1.self_attn.k_proj.weight"), "non-finite values (NaN or inf) in tensor(s) "
                                                        "model.layers.1.self_attn.k_proj.weight"),
    (_add("model.embed_tokens.weight", torch.full((256, 64), float("inf"))), "model.embed_tokens.weight"),
], ids=["missing", "missing-lm-head", "unexpected", "shape", "nan", "inf"])
def test_weights_that_do_not_fit_the_architecture_are_errors_naming_file_and_tensor(tmp_path, reference_dir,
                                                                                    edit, message):
    ckpt = checkpoint(tmp_path, reference_dir, edit)
    with pytest.raises(LoopKVError) as caught:
        load_teacher(ckpt)
    assert message in str(caught.value)
    assert str(ckpt / WEIGHTS) in str(caught.value)


def test_flipped_bytes_in_the_header_or_a_weight_are_errors_naming_the_file(tmp_path, reference_dir):
    ckpt = checkpoint(tmp_path, reference_dir)
    path = ckpt / WEIGHTS
    raw = bytearray(path.read_bytes())
    raw[12] ^= 0xFF                                      # inside the JSON header
    path.write_bytes(bytes(raw))
    with pytest.raises(LoopKVError, match="not a readable safetensors file.*truncated or corrupt") as caught:
        load_teacher(ckpt)
    assert str(path) in str(caught.value)
    raw[12] ^= 0xFF
    start, _ = _data_span(bytes(raw), "model.norm.weight")
    raw[start:start + 4] = b"\xff\xff\xff\x7f"           # one float32 of the data flipped to NaN
    path.write_bytes(bytes(raw))
    with pytest.raises(LoopKVError, match="non-finite values .* model.norm.weight"):
        load_teacher(ckpt)


def test_a_sharded_checkpoint_is_checked_across_its_files(tmp_path, reference_dir):
    ckpt = checkpoint(tmp_path, reference_dir)
    tensors = load_file(ckpt / WEIGHTS)
    (ckpt / WEIGHTS).unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    for file, part in shards.items():
        save_file({n: tensors[n] for n in part}, ckpt / file, metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {n: f for f, part in shards.items() for n in part}}
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
    assert load_teacher(ckpt).model.norm.weight.shape == (64,)
    save_file({n: tensors[n] for n in names[11:]}, ckpt / "model-00002-of-00002.safetensors",
              metadata={"format": "pt"})
    with pytest.raises(LoopKVError, match=rf"model.safetensors.index.json: 2 files\): missing tensor\(s\) {names[10]}"):
        load_teacher(ckpt)


def test_a_tied_copy_may_be_absent_from_the_file(reference_dir):
    from loopkv.models.loading import tied_copies

    shared = torch.nn.Linear(2, 2)
    model = torch.nn.ModuleDict({"a": shared, "b": torch.nn.Linear(2, 2)})
    model["b"].weight = shared.weight                    # b.weight ties to a.weight
    assert tied_copies(model, {"a.weight": (2, 2)}) == {"a.weight", "b.weight"}
    assert tied_copies(model, {}) == set()               # one of them must be in the file
    assert load_teacher(reference_dir).lm_head.weight.shape == (256, 64)   # the real layout loads


def test_a_foreign_config_is_an_error_naming_config_json(tmp_path, reference_dir):
    ckpt = checkpoint(tmp_path, reference_dir)
    text = (ckpt / "config.json").read_text()
    (ckpt / "config.json").write_text(text[:len(text) // 2])
    with pytest.raises(LoopKVError, match=r"config.json: not valid JSON at line \d+"):
        load_teacher(ckpt)
    (ckpt / "config.json").write_text("[1, 2]")
    with pytest.raises(LoopKVError, match="config.json: the top level is a list, expected a mapping"):
        load_teacher(ckpt)


def test_corrupt_weights_through_the_cli_exit_2_without_traceback_unless_debug(tmp_path, reference_dir):
    ckpt = checkpoint(tmp_path, reference_dir, _drop("model.layers.1.mlp.down_proj.weight"))
    (tmp_path / "corpus").mkdir()
    args = ["calibrate", "--cfg", json.dumps({"seed": 0, "calibration": {}, "model": {"dtype": "float32"}}),
            "--teacher", ckpt, "--corpus", tmp_path / "corpus", "--out", tmp_path / "c.pt",
            "--manifest", tmp_path / "c.json"]
    rc, err = run_cli(*args)
    assert_clean_error(rc, err, ckpt / WEIGHTS, "model.layers.1.mlp.down_proj.weight")
    rc, err = run_cli(*args, debug=True)
    assert rc != 0 and "Traceback" in err and "LoopKVError" in err


# -- torch files: codecs, training checkpoints, calibration ------------------------------------------
class Foreign:
    """An object no loopkv file holds (weights_only refuses to unpickle it)."""


def test_training_checkpoint_of_another_shape_is_reported(tmp_path):
    from loopkv.train.checkpoint import load_checkpoint, save_checkpoint
    from loopkv.train.pretrain import CHECKPOINT_FIELDS

    path = tmp_path / "last.pt"
    for payload, message in [([1, 2, 3], "the top level is a list, expected a mapping"),
                             ({"step": 3}, "field 'model' is missing"),
                             ({"step": "3", "model": {}}, "field 'step' is str '3', expected int"),
                             (Foreign(), "holds objects other than tensors")]:
        torch.save(payload, path)
        with pytest.raises(LoopKVError, match=message) as caught:
            load_checkpoint(tmp_path, CHECKPOINT_FIELDS)
        assert str(path) in str(caught.value)
    save_checkpoint(tmp_path, {"step": 1, "model": {}, "optimizer": {"state": {}, "param_groups": []},
                               "curve": {"train": [], "val": []}, "torch_rng": torch.get_rng_state()})
    assert load_checkpoint(tmp_path, CHECKPOINT_FIELDS)["step"] == 1


def test_state_dicts_are_checked_before_loading():
    from loopkv.utils.checked_io import check_state_dict

    module = torch.nn.Linear(3, 2)
    good = {k: v.clone() for k, v in module.state_dict().items()}
    check_state_dict(good, module, "ckpt.pt")
    for state, message in [({"weight": good["weight"]}, r"ckpt.pt: missing tensor\(s\) bias"),
                           ({**good, "extra": torch.zeros(1)}, r"unexpected tensor\(s\) extra"),
                           ({**good, "bias": torch.zeros(3)}, r"bias is \(3,\) where the model expects \(2,\)"),
                           ({**good, "bias": torch.tensor([0.0, float("nan")])}, "non-finite .* bias"),
                           ({**good, "bias": [0.0, 1.0]}, "not tensors: bias"),
                           ([1, 2], "expected a mapping of tensors")]:
        with pytest.raises(LoopKVError, match=message):
            check_state_dict(state, module, "ckpt.pt")


def test_codec_files_holding_another_object_or_wrong_tensors_are_reported(tmp_path, reference_model):
    from loopkv.cache.settings import load_codec, new_codec, read_codec_file

    setting = {"method": "lla", "kwargs": {"rank_k": 2, "rank_v": 2}}
    path = tmp_path / "codec.pt"
    for payload, message in [({"setting": "lla", "codec_state": {}}, "field 'setting' is str 'lla', expected a mapping"),
                             ({"setting": {"method": "lla"}, "codec_state": {}}, "field 'setting.kwargs' is missing"),
                             (Foreign(), "holds objects other than tensors")]:
        torch.save(payload, path)
        with pytest.raises(LoopKVError, match=message) as caught:
            read_codec_file(path, setting)
        assert str(path) in str(caught.value)
    state = new_codec(setting, reference_model.config).state_dict()
    name = next(iter(state))
    bad = {**state, name: torch.zeros(1)}
    with pytest.raises(LoopKVError, match=f"codec {path}: shape mismatch: {name}"):
        load_codec(setting, reference_model.config, bad, f"codec {path}")


def calibration_state(samples=None):
    empty = {"count": 0, "total": None, "outer": None}
    return {"layouts": ("per_head",), "samples": torch.randn(2, 6, 2, 4, 3, 16) if samples is None else samples,
            "moments": {"per_head/k": dict(empty), "per_head/v": dict(empty)}}


def test_calibration_that_is_truncated_foreign_or_incomplete_is_reported(tmp_path):
    from loopkv.analysis.calibration import load_calibration

    path = tmp_path / "calibration.pt"
    torch.save(calibration_state(), path)
    assert load_calibration(path).layouts == ("per_head",)
    for payload, message in [({"layouts": ["per_head"]}, "field 'samples' is missing"),
                             ({**calibration_state(), "moments": {"per_head/k": {"count": 0}}},
                              "moments 'per_head/k': field 'total' is missing"),
                             (calibration_state(torch.zeros(3, 4)), r"samples of shape \(3, 4\)"),
                             (Foreign(), "holds objects other than tensors")]:
        torch.save(payload, path)
        with pytest.raises(LoopKVError, match=message) as caught:
            load_calibration(path)
        assert str(path) in str(caught.value)


def test_truncated_calibration_through_the_cli(tmp_path):
    path = tmp_path / "calibration.pt"
    torch.save(calibration_state(), path)
    path.write_bytes(path.read_bytes()[:400])
    rc, err = run_cli("cross-loop-structure", "--calibration", path, "--out", tmp_path / "s.json")
    assert_clean_error(rc, err, path, "corrupt or truncated")
    assert not (tmp_path / "s.json").exists()


# -- tokenizer ---------------------------------------------------------------------------------------
def tiny_tokenizer(directory):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"<pad>": 0, "a": 1}, unk_token="<pad>"))
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>").save_pretrained(str(directory))
    return directory


def test_truncated_or_foreign_tokenizer_json_is_reported_by_file_and_line(tmp_path):
    from loopkv.data.tokenizer import load_tokenizer

    directory = tiny_tokenizer(tmp_path / "tok")
    assert load_tokenizer(directory)("a")["input_ids"] == [1]
    path = directory / "tokenizer.json"
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    with pytest.raises(LoopKVError, match=rf"tokenizer file {path}: not valid JSON at line \d+ column \d+"):
        load_tokenizer(directory)
    path.write_text('{"version": "1.0"}')           # valid JSON, not a tokenizer (a KeyError before)
    with pytest.raises(LoopKVError, match=f"{path}: field 'model' is missing"):
        load_tokenizer(directory)
    path.write_text(text)
    (directory / "tokenizer_config.json").write_text("{\"pad_token\": ")
    with pytest.raises(LoopKVError, match="tokenizer_config.json: not valid JSON at line 1"):
        load_tokenizer(directory)


# -- JSON Lines: task data ---------------------------------------------------------------------------
def test_a_malformed_task_line_is_reported_by_file_and_line_number(tmp_path):
    from loopkv.data.encoding import load_task_examples

    directory = tmp_path / "task"
    directory.mkdir()
    path = directory / "train.jsonl"
    good = json.dumps({"prompt": "a", "target": "a"})
    tokenizer = None   # never reached: the rows are checked first
    for text, message in [(f"{good}\n\n{good}\n{good[:9]}\n", "line 4: not valid JSON"),
                          (f"{good}\n{json.dumps({'prompt': 'a'})}\n", "line 2: field 'target' is missing"),
                          (f"{good}\n[1]\n", "line 2: the top level is a list, expected a mapping"),
                          (b'{"prompt": "\xff"}\n', "line 1: not UTF-8 text")]:
        (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
        with pytest.raises(LoopKVError, match=message) as caught:
            load_task_examples(tokenizer, {"t": directory})
        assert str(path) in str(caught.value)


def test_a_malformed_first_line_of_an_lm_eval_task(tmp_path):
    from loopkv.eval.lm_tasks import task_config

    (tmp_path / "test.jsonl").write_text('{"prompt": "x", "targ\n')
    with pytest.raises(LoopKVError, match=f"task data {tmp_path / 'test.jsonl'} line 1: not valid JSON"):
        task_config("loopkv_passkey", tmp_path, tokenizer=object(), resolve=False)


# -- JSON: the cross-loop structure, lm-eval shards ---------------------------------------------------
def test_truncated_cross_loop_structure_through_the_cli(tmp_path):
    path = tmp_path / "cross_loop_structure.json"
    path.write_text('{"measured": {"k": {"spectra": ')
    args = ["plot-cross-loop", "--cfg", '{"report": {"dpi": 50}}', "--structure", path, "--figure", tmp_path / "f.pdf"]
    rc, err = run_cli(*args)
    assert_clean_error(rc, err, path, "not valid JSON at line 1")
    path.write_text(json.dumps({"measured": {"k": {}}, "paper": {}}))
    from loopkv.cli import main

    with pytest.raises(LoopKVError, match="field 'measured.k.spectra' is missing"):
        main(["--debug", *map(str, args)])


def test_truncated_or_incomplete_lm_eval_shard_through_the_cli(tmp_path, monkeypatch, capsys):
    from loopkv.cli import main

    shard = tmp_path / "shard0of1.json"
    shard.write_text('{"task": "loopkv_gsm8k", "samples": [')
    rc, err = run_cli("lm-eval-merge", shard, "--out", tmp_path / "merged.json")
    assert_clean_error(rc, err, shard, "not valid JSON")
    shard.write_text(json.dumps({"task": "loopkv_gsm8k", "samples": []}))
    with pytest.raises(LoopKVError, match=f"lm-eval shard {shard}: field 'selection' is missing"):
        main(["--debug", "lm-eval-merge", str(shard), "--out", str(tmp_path / "merged.json")])
    assert main(["lm-eval-merge", str(shard), "--out", str(tmp_path / "merged.json")]) == 2
    assert f"error: lm-eval shard {shard}: field 'selection' is missing" in capsys.readouterr().err
    monkeypatch.setenv("LOOPKV_DEBUG", "1")                  # the traceback, as with --debug
    with pytest.raises(LoopKVError):
        main(["lm-eval-merge", str(shard), "--out", str(tmp_path / "merged.json")])
    assert not (tmp_path / "merged.json").exists()
