"""`loopkv verify results/`: the reviewer's check of a results tree. Every JSON result is parsed (a
truncated or corrupt file is reported), its provenance block's config hash is recomputed from its
config slice, and every input it records is re-hashed: a result whose inputs have changed since it
was made (or are gone) is reported. Paths in provenance are relative to the directory the workflow
ran in (`--root`, default the current directory). Exit status 1 when anything is wrong."""
from __future__ import annotations

import json
from pathlib import Path

from loopkv.utils.provenance import config_hash, path_sha256

SKIP_DIRS = {"checkpoints", "request_cache"}   # resumable state and caches: not results


def register(sub) -> None:
    p = sub.add_parser("verify", help="re-check every result's provenance: parse, config hash, input hashes")
    p.add_argument("results", nargs="+", help="results directories (or single result files)")
    p.add_argument("--root", default=".", help="directory the recorded input paths are relative to")
    p.add_argument("--json", help="write the full report here")
    p.set_defaults(func=_verify)


def _result_files(paths: list[str]) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_file():
            files.append(p)
        else:
            files += [f for f in sorted(p.rglob("*.json")) if not SKIP_DIRS & set(f.parts)]
    return files


def _blocks(obj) -> list[dict]:
    """Provenance blocks of a result: its own, or those of the shards it was merged from."""
    prov = obj.get("provenance") if isinstance(obj, dict) else None
    if not isinstance(prov, dict):
        return []
    if "merged_from" in prov:
        return [b for b in prov["merged_from"].values() if isinstance(b, dict)]
    return [prov]


def verify(paths: list[str], root=".") -> dict:
    root = Path(root)
    hashes: dict[Path, str | None] = {}

    def current(path: Path) -> str | None:
        if path not in hashes:
            hashes[path] = path_sha256(path) if path.exists() else None
        return hashes[path]

    report = {"ok": [], "no_provenance": [], "corrupt": [], "config_mismatch": [], "inputs_changed": [],
              "inputs_missing": []}
    for file in _result_files(paths):
        try:
            obj = json.loads(file.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            report["corrupt"].append({"file": str(file), "error": str(e)})
            continue
        blocks = _blocks(obj)
        if not blocks:
            report["no_provenance"].append(str(file))
            continue
        problems = False
        for block in blocks:
            if "config" in block and block.get("config_hash") != config_hash(block["config"]):
                report["config_mismatch"].append({"file": str(file), "recorded": block.get("config_hash")})
                problems = True
            for name, recorded in (block.get("inputs") or {}).items():
                now = current(root / recorded["path"])
                if now is None:
                    report["inputs_missing"].append({"file": str(file), "input": name, "path": recorded["path"]})
                    problems = True
                elif now != recorded["sha256"]:
                    report["inputs_changed"].append({"file": str(file), "input": name, "path": recorded["path"]})
                    problems = True
        if not problems:
            report["ok"].append(str(file))
    return report


def _verify(args) -> int:
    report = verify(args.results, args.root)
    if args.json:
        from loopkv.utils.atomic import write_json

        write_json(args.json, report)
    print(f"{len(report['ok'])} results verified; {len(report['no_provenance'])} JSON files without provenance")
    bad = 0
    for kind in ("corrupt", "config_mismatch", "inputs_changed", "inputs_missing"):
        for item in report[kind]:
            print(f"{kind}: {json.dumps(item, sort_keys=True)}")
            bad += 1
    return 1 if bad else 0
