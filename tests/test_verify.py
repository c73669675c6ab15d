"""`loopkv verify`: a reviewer's re-check of results finds truncated files, edited configs, and results
whose inputs changed or vanished after they were made."""
import json

from loopkv.cli import main
from loopkv.utils.atomic import write_json
from loopkv.utils.provenance import Provenance
from loopkv.verify import verify


def _tree(tmp_path):
    (tmp_path / "results" / "data").mkdir(parents=True)
    data = tmp_path / "results" / "data" / "rows.txt"
    data.write_text("1 2 3\n")
    model = tmp_path / "results" / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00\x01")
    prov = Provenance({"lr": 0.1}, 7, {"data": "results/data/rows.txt", "model": "results/model"})
    write_json(tmp_path / "results" / "a.json", {"metrics": {"x": 1}, "provenance": prov.block()})
    write_json(tmp_path / "results" / "merged.json",
               {"metrics": {}, "provenance": {"merged_from": {"s0": prov.block(), "s1": prov.block()}}})
    return tmp_path


def test_an_untouched_tree_verifies(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    report = verify(["results"])
    assert sorted(report["ok"]) == ["results/a.json", "results/merged.json"]
    assert main(["verify", "results"]) == 0


def test_changed_and_missing_inputs_and_corrupt_results_are_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "results" / "model" / "weights.bin").write_bytes(b"\x00\x02")      # retrained after the fact
    report = verify(["results"])
    assert {(r["file"], r["input"]) for r in report["inputs_changed"]} == {
        ("results/a.json", "model"), ("results/merged.json", "model")}
    (tmp_path / "results" / "data" / "rows.txt").unlink()
    assert {r["input"] for r in verify(["results"])["inputs_missing"]} == {"data"}
    text = (tmp_path / "results" / "a.json").read_text()
    (tmp_path / "results" / "a.json").write_text(text[:len(text) // 2])            # truncated
    report = verify(["results"])
    assert [r["file"] for r in report["corrupt"]] == ["results/a.json"]
    assert main(["verify", "results", "--json", "report.json"]) == 1
    assert json.loads((tmp_path / "report.json").read_text())["corrupt"][0]["file"] == "results/a.json"


def test_an_edited_config_no_longer_matches_its_hash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    result = json.loads((tmp_path / "results" / "a.json").read_text())
    result["provenance"]["config"]["lr"] = 0.2
    (tmp_path / "results" / "a.json").write_text(json.dumps(result))
    assert [r["file"] for r in verify(["results"])["config_mismatch"]] == ["results/a.json"]
