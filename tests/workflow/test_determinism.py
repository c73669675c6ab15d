"""Two clean runs of the micro config give byte-identical table CSVs (and figure data), and `loopkv
verify` finds every result of a finished run consistent with its inputs."""
import csv

import pytest

from loopkv.cli import main
from workflow_helpers import copy_workflow, snakemake

pytestmark = pytest.mark.slow


TIMED = {"table5.csv", "table13.csv", "claims.csv"}   # serving speed and kernel timings: measurements of one run


def test_two_clean_runs_give_byte_identical_tables(finished, tmp_path):
    again = copy_workflow(tmp_path)
    snakemake(again, "--configfile", "micro.yaml")
    tables = sorted(p.name for p in (finished / "reports").glob("*.csv") if p.name not in TIMED)
    assert len(tables) >= 7        # table1, table4, table7, table12, the three MELT tables
    for name in tables:
        assert (again / "reports" / name).read_bytes() == (finished / "reports" / name).read_bytes(), name
    # the serving tables hold timings of the run; their bytes and capacities are still deterministic
    rows = [[r for r in csv.DictReader(open(run / "reports/table5.csv")) if r["section"] == "bytes and capacity"]
            for run in (finished, again)]
    keys = ("scale", "method", "served", "kib_per_token", "compression_ratio", "max_batch", "capacity_ratio")
    assert rows[0] and [[r[k] for k in keys] for r in rows[0]] == [[r[k] for k in keys] for r in rows[1]]
    # every claim's verdict and evidence repeat, but those resting on a timing or a process's memory
    claims = [[r for r in csv.DictReader(open(run / "reports/claims.csv")) if r["one_run"] == "False"]
              for run in (finished, again)]
    assert len(claims[0]) >= 30 and claims[0] == claims[1]
    for name in ("fig8_passkey.json", "fig7_exposure.json"):
        assert (again / "reports" / name).read_bytes() == (finished / "reports" / name).read_bytes(), name


def test_verify_finds_a_finished_run_consistent(finished, monkeypatch, capsys):
    monkeypatch.chdir(finished)
    assert main(["verify", "results"]) == 0
    assert "results verified" in capsys.readouterr().out
