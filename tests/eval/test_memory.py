"""Memory against length and bytes against T: byte counts equal the formulas and the allocated
tensors, MELT's per-token bytes do not move with T, a spawned probe reports process memory."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_model  # noqa: E402

from loopkv.cache import make_cache  # noqa: E402
from loopkv.eval.memory import bytes_over_loops, decode_memory_curve, measure  # noqa: E402
from loopkv.models.melt_model import melt_from_teacher, save_melt  # noqa: E402

METHODS = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"4x": 4.0}}


def test_decoded_cache_bytes_follow_the_formula_and_melt_is_T_times_smaller():
    teacher = small_model(loops=4)
    student = melt_from_teacher(teacher, "full", chunk_size=1).eval()
    prompt = torch.full((2, 3), 5)
    full = decode_memory_curve(teacher, make_cache("full", teacher.config), prompt, [4, 8], torch.bfloat16)
    melt = decode_memory_curve(student, make_cache("melt", student.config), prompt, [4, 8], torch.bfloat16)
    per_token = make_cache("melt", teacher.config).bytes_per_token(torch.float32)
    for f, m in zip(full, melt):
        assert f["cached_tokens"] == m["cached_tokens"] == 2 * (3 + f["generated"])
        assert m["cache_allocated_bytes"] == per_token * m["cached_tokens"]
        assert f["cache_allocated_bytes"] == 4 * m["cache_allocated_bytes"]
        assert m["cache_bytes_at_cache_dtype"] == m["cache_allocated_bytes"] // 2     # bf16 = half of float32
        assert m["peak_memory_bytes"] >= m["memory_bytes"] > 0


def test_bytes_over_loops_allocated_equal_formula_and_melt_is_flat():
    teacher = small_model(loops=4)
    student = melt_from_teacher(teacher, "full", chunk_size=1).eval()
    rows = bytes_over_loops(teacher, student, [("full", "1x", METHODS), ("melt", "4x", METHODS),
                                               ("lla", "4x", METHODS)], [2, 4, 8], torch.bfloat16)
    by = {(r["method"], r["loops"]): r for r in rows}
    for r in rows:
        assert r["allocated_bytes_per_token"] == r["formula_bytes_per_token_compute_dtype"], r
    assert {by["melt", t]["bytes_per_token"] for t in (2, 4, 8)} == {by["full", 2]["bytes_per_token"] // 2}
    assert [by["full", t]["bytes_per_token"] for t in (2, 4, 8)] == [by["full", 2]["bytes_per_token"] * k for k in (1, 2, 4)]
    assert [by["lla", t]["bytes_per_token"] * 4 for t in (2, 4, 8)] == [by["full", t]["bytes_per_token"] for t in (2, 4, 8)]
    assert teacher.config.total_ut_steps == 4 and student.config.total_ut_steps == 4   # the inputs are untouched


def test_probe_runs_in_its_own_process(tmp_path):
    teacher = small_model(loops=2)
    teacher.save_pretrained(tmp_path / "teacher")
    save_melt(melt_from_teacher(teacher, "mean", chunk_size=4), tmp_path / "melt")
    job = {"teacher": str(tmp_path / "teacher"), "student": str(tmp_path / "melt"), "dtype": "float32",
           "methods_cfg": {**METHODS, "budgets": {"2x": 2.0}}, "lengths": [2, 5], "batch": 1, "prompt_len": 3,
           "prompt_token": 5, "threads": 1}
    full, melt = measure([{**job, "method": "full", "budget": "1x"}, {**job, "method": "melt", "budget": "2x"}])
    assert [p["generated"] for p in melt["points"]] == [2, 5]
    assert full["points"][-1]["cache_allocated_bytes"] == 2 * melt["points"][-1]["cache_allocated_bytes"]
    assert melt["process_after_load"]["memory_bytes"] > 0 and melt["memory_measure"].startswith("process RSS")
