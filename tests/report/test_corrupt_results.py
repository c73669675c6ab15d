"""Report commands read results through the checked readers (issue 20): a truncated or incomplete
results JSON is an error naming the file, exit status 2, no traceback unless `loopkv --debug`."""
import json
import subprocess
import sys

import pytest

from loopkv.cli import main
from loopkv.errors import LoopKVError


def _table_args(tmp_path):
    cfg = json.dumps({"data": {"tasks": {"passkey": {"train_lengths": [100]}}}})
    return ["--cfg", cfg, *(x for f in ("pdf", "csv", "tex") for x in (f"--{f}", str(tmp_path / f"t.{f}")))]


def test_a_truncated_result_read_by_a_report_command(tmp_path):
    cell = tmp_path / "quality.json"
    cell.write_text('{"metrics": {"heldout": {"loss": 1.')
    argv = [sys.executable, "-m", "loopkv", "melt-vs-lla", "--teacher-cell", str(cell), "--melt-cell", str(cell),
            *_table_args(tmp_path)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert f"result {cell}: not valid JSON at line 1" in out.stderr
    assert not (tmp_path / "t.pdf").exists()


def test_a_result_without_its_metrics_read_by_a_report_command(tmp_path):
    cell = tmp_path / "quality.json"
    cell.write_text(json.dumps({"provenance": {}}))
    with pytest.raises(LoopKVError, match=f"result {cell}: field 'metrics' is missing"):
        main(["--debug", "table1", "--cells", str(cell), "--samples", str(cell), *_table_args(tmp_path)])
