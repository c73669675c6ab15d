"""LLA Table 4 / Figure 7 from samples: rates, the paper's rows this run does not have, intervals."""
import csv

import pytest

from loopkv.report import exposure, tables
from loopkv.report.paper_values import TABLE4


def _samples(correct: list[bool], answered: list[bool], lengths: list[int]) -> list[dict]:
    return [{"correct": c, "output": "x #### 7" if a else "x", "n_generated": n}
            for c, a, n in zip(correct, answered, lengths)]


def _cell(ratio: float) -> dict:
    off = _samples([True, False, False, False], [True, True, False, False], [3, 5, 9, 12])
    on = _samples([True, True, True, False], [True, True, True, True], [3, 5, 9, 12])
    metrics = {"method": "lla", "budget": "4x", "setting": {"ratio": ratio}, "fidelity": {"kl": 0.1}}
    return {"off": metrics, "on": {**metrics, "fidelity": {"kl": 0.05}}, "off_samples": off, "on_samples": on,
            "off_curve": {"best": {"kl": 0.2}},
            "on_curve": {"best": {"kl": 0.1, "window_kl": 0.15, "step": 2},
                         "curve": {"train": [{"step": 2}], "heldout": [{"kl": 0.3}]}}}


def test_rows_rates_and_the_papers_other_ratios_as_not_run(tmp_path):
    teacher = {"samples": {"arithmetic": _samples([True] * 4, [True] * 4, [3, 5, 9, 12])}}
    rows = exposure.table_rows([_cell(4.0)], teacher)
    assert (rows[0]["em_off"], rows[0]["em_on"], rows[0]["no_answer_off"], rows[0]["no_answer_on"]) == (0.25, 0.75, 0.5, 0)
    assert rows[0]["paper_on"] == TABLE4[4.0]["on"]
    assert [(r["budget"], r["ratio"]) for r in rows[1:]] == [("not run", k) for k in TABLE4 if k != 4.0]
    assert rows[1]["paper_off"] == TABLE4[3.2]["off"]
    tables.write_all(rows, exposure.SPEC, exposure.table_note(rows), "t", tmp_path / "t.pdf", tmp_path / "t.csv",
                     tmp_path / "t.tex")
    read = list(csv.DictReader(open(tmp_path / "t.csv")))
    from scipy.stats import binomtest
    ci = binomtest(1, 4).proportion_ci(method="wilson")
    assert (float(read[0]["em_off_lo"]), float(read[0]["em_off_hi"])) == pytest.approx((ci.low, ci.high))


def test_exposure_figure_draws_every_bin(tmp_path):
    cell = _cell(4.0)
    teacher = exposure.exposure_curve(cell["on_samples"], 4)
    curves = [{"budget": "4x", "teacher": teacher, "off": exposure.exposure_curve(cell["off_samples"], 4),
               "on": exposure.exposure_curve(cell["on_samples"], 4)}]
    assert [(p["lo"], p["n"]) for p in curves[0]["off"]] == [(0, 1), (4, 1), (8, 1), (12, 1)]
    exposure.plot_exposure(curves, 4, tmp_path / "f.pdf", tmp_path / "f.png", 50)
    assert (tmp_path / "f.pdf").read_bytes().startswith(b"%PDF")
