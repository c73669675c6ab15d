"""Two clean runs of the micro config give byte-identical table CSVs (and figure data), and `loopkv
verify` finds every result of a finished run consistent with its inputs."""
import pytest

from loopkv.cli import main
from workflow_helpers import copy_workflow, snakemake

pytestmark = pytest.mark.slow


def test_two_clean_runs_give_byte_identical_tables(finished, tmp_path):
    again = copy_workflow(tmp_path)
    snakemake(again, "--configfile", "micro.yaml")
    tables = sorted(p.name for p in (finished / "reports").glob("*.csv"))
    assert len(tables) >= 7        # table1, table4, table7, table12, the three MELT tables
    for name in tables:
        assert (again / "reports" / name).read_bytes() == (finished / "reports" / name).read_bytes(), name
    for name in ("fig8_passkey.json", "fig7_exposure.json"):
        assert (again / "reports" / name).read_bytes() == (finished / "reports" / name).read_bytes(), name


def test_verify_finds_a_finished_run_consistent(finished, monkeypatch, capsys):
    monkeypatch.chdir(finished)
    assert main(["verify", "results"]) == 0
    assert "results verified" in capsys.readouterr().out
