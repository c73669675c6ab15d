"""A training job's log (train/step_log.py): one line per held-out measurement and checkpoint with
the step, the train loss and tokens/s since the previous line, the held-out value and the
checkpoint's path, and a line saying where a resumed run started. Tiny real runs: teacher
pretraining (its own loop) and codec distillation (the step loop MELT's stages share)."""
import logging
import math
import re

import pytest
from test_distill import CFG as DISTILL_CFG, VAL, batches, calibration, lla, teacher, view_of  # noqa: F401
from test_pretrain_resume import ARCH, CFG as PRETRAIN_CFG, run

import loopkv.train.pretrain as pretrain_module
from loopkv.train.distill import distill_codec
from loopkv.train.pretrain import pretrain

LINE = re.compile(r"(?P<desc>\S+) step (?P<step>\d+)/(?P<total>\d+)"
                  r"(?:, train loss (?P<loss>\S+) over (?P<steps>\d+) steps?, (?P<speed>\S+) tokens/s)?"
                  r"(?:, held-out (?P<heldout>[^,(]+?)(?: \(at step (?P<at>\d+)\))?)?"
                  r"(?:, checkpoint (?P<checkpoint>.+))?$")


def lines(caplog, logger: str) -> list[dict]:
    """The step lines `logger` wrote, parsed: numbers as numbers, held-out values as a dict."""
    parsed = []
    for record in caplog.records:
        if record.name == logger and (match := LINE.fullmatch(record.getMessage())):
            line = match.groupdict()
            line["heldout"] = {k: float(v) for k, v in (kv.split("=") for kv in (line["heldout"] or "").split())}
            parsed.append(line)
    return parsed


def resumes(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and "resumed from" in r.getMessage()]


def assert_lines_match_the_curve(logged: list[dict], train: list[dict], heldout: list[dict], key: str,
                                 total: int, first_step: int = 0) -> None:
    """Each measurement has its own line carrying its value; each line's loss is the mean of the
    curve's losses since the previous line, its tokens/s positive."""
    assert [int(line["step"]) for line in logged if line["heldout"] and line["at"] is None] == \
        [p["step"] for p in heldout]
    previous = first_step
    for line in logged:
        step = int(line["step"])
        assert int(line["total"]) == total
        if step == previous:   # the initial measurement: no training step before it
            assert line["loss"] is None
            continue
        losses = [r["loss"] for r in train if previous < r["step"] <= step]
        assert int(line["steps"]) == len(losses)
        assert float(line["loss"]) == pytest.approx(sum(losses) / len(losses), rel=1e-4)
        assert float(line["speed"]) > 0 and math.isfinite(float(line["speed"]))
        previous = step
    for line in logged:
        if line["heldout"] and line["at"] is None:
            measured = next(p for p in heldout if p["step"] == int(line["step"]))
            assert line["heldout"][key] == pytest.approx(measured[key], rel=1e-4)


def test_pretraining_logs_each_measurement_and_checkpoint_and_its_resume(
        tmp_path, monkeypatch, caplog, corpus_dir, tokenizer_dir, micro_task_dirs):
    caplog.set_level(logging.INFO, logger="loopkv")
    logger = "loopkv.train.pretrain"
    _, ck, curve = run(tmp_path, "whole", corpus_dir, tokenizer_dir, micro_task_dirs)   # 6 steps, eval 3, save 2
    logged = lines(caplog, logger)
    assert [int(line["step"]) for line in logged] == [2, 3, 4, 6]
    assert_lines_match_the_curve(logged, curve["train"], curve["val"], "final_loop_ce", total=6)
    assert [line["checkpoint"] for line in logged] == [str(ck / "last.pt"), None, str(ck / "last.pt"),
                                                       str(ck / "last.pt")]
    assert logged[0]["heldout"] == {} and logged[2]["at"] == "3"   # the latest measurement, named with its step
    assert resumes(caplog, logger) == []

    real_save = pretrain_module.save_checkpoint

    def save_then_die(directory, state):
        path = real_save(directory, state)
        if state["step"] == 4:
            raise KeyboardInterrupt("killed right after the step-4 checkpoint")
        return path

    monkeypatch.setattr(pretrain_module, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "killed", corpus_dir, tokenizer_dir, micro_task_dirs)
    monkeypatch.setattr(pretrain_module, "save_checkpoint", real_save)
    caplog.clear()
    ck = tmp_path / "killed" / "ck"
    resumed = pretrain(PRETRAIN_CFG, ARCH, "float32", 11, corpus_dir, tokenizer_dir,
                       {k: micro_task_dirs[k] for k in ("passkey", "arithmetic")}, tmp_path / "killed" / "model", ck,
                       progress=False)
    assert resumes(caplog, logger) == [f"teacher: resumed from step 4/6 (training checkpoint {ck / 'last.pt'})"]
    logged = lines(caplog, logger)
    assert [int(line["step"]) for line in logged] == [6]
    assert_lines_match_the_curve(logged, resumed["train"], resumed["val"][-1:], "final_loop_ce", total=6,
                                 first_step=4)


def test_distillation_logs_each_measurement_and_checkpoint_and_its_resume(teacher, calibration, tmp_path, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, logger="loopkv")
    logger = "loopkv.train.stage_loop"
    cfg = {**DISTILL_CFG, "checkpoint_every": 4}   # 6 steps, held-out every 2, saved at 4 and the end
    whole = distill_codec(cfg, teacher, view_of(teacher, calibration, lla(2, 3)), batches, VAL, tmp_path / "whole",
                          progress=False)
    logged = lines(caplog, logger)
    assert [int(line["step"]) for line in logged] == [0, 2, 4, 6]
    assert_lines_match_the_curve(logged, whole["curve"]["train"], whole["curve"]["heldout"], "kl", total=6)
    assert [line["checkpoint"] for line in logged] == [
        None, None, str(tmp_path / "whole" / "world1" / "step00000004"),
        str(tmp_path / "whole" / "world1" / "step00000006")]
    assert all(line["desc"] == "distill" for line in logged)

    def dying(step):
        if step == 4:   # killed after the step-4 checkpoint
            raise KeyboardInterrupt
        return batches(step)

    with pytest.raises(KeyboardInterrupt):
        distill_codec(cfg, teacher, view_of(teacher, calibration, lla(2, 3)), dying, VAL, tmp_path / "cut",
                      progress=False)
    caplog.clear()
    resumed = distill_codec(cfg, teacher, view_of(teacher, calibration, lla(2, 3)), batches, VAL,
                            tmp_path / "cut", progress=False)
    assert resumes(caplog, logger) == [f"distill: resumed from step 4/6 (DeepSpeed checkpoint in {tmp_path / 'cut'})"]
    logged = lines(caplog, logger)
    assert [int(line["step"]) for line in logged] == [6]
    assert_lines_match_the_curve(logged, resumed["curve"]["train"], resumed["curve"]["heldout"][-1:], "kl",
                                 total=6, first_step=4)
