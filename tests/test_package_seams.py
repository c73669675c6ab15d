"""The package's seams: its subpackages are layered, and no module uses another's private names.

Layers, lowest first. A subpackage may import subpackages of lower layers only; the ones sharing a
layer are independent of each other:

  0  data      corpus, tokenizer, tasks, benchmarks; texts as token ids (encoding.py) and the
               fixed-length rows of a split (windows.py), which training and evaluation both read
     kernels   latent-attention kernels (torch, Triton, C++): tensors in, tensors out
  1  cache     the KV methods; LLA's fused read and serving encode run through kernels
  2  serve     bytes, capacity, speed of served caches and the kernels' speed
     eval      measurements of a model read through a cache (held-out CE, fidelity, tasks)
     analysis  the calibrate stage (the teacher's K/V moments and samples) and cross-loop structure
  3  train     pretraining and post-training: held-out CE, KL and generation come from eval, the
               codec's SVD initialisation from analysis's calibration state (the distil stage
               reads what the calibrate stage wrote; that reader lives beside its writer)

Imports are read with ast from every module under src/loopkv, function-local ones included (the
commands import lazily). Other packages (models, jobs, report, utils, config, the CLI) are not
placed in these layers and paths through them are not followed: models.rope is imported by cache
and kernels while models.modeling_ouro imports cache, a cycle these tests leave to another change.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
LAYER = {"data": 0, "kernels": 0, "cache": 1, "serve": 2, "eval": 2, "analysis": 2, "train": 3}


def module_name(path: Path, src: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, src: Path):
    """(imported module, name or None, line) of every loopkv import in `path`, at any depth."""
    here = module_name(path, src)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: resolved against this module's package
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                yield base, alias.name, node.lineno


def is_module(name: str, src: Path) -> bool:
    path = src.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "loopkv" else None


def modules(src: Path) -> list[Path]:
    return sorted((src / "loopkv").rglob("*.py"))


def subpackage_edges(src: Path) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) subpackages of LAYER -> the imports behind the edge ("module:line -> target")."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in modules(src):
        here = module_name(path, src)
        for target, name, line in imports(path, src):
            full = f"{target}.{name}" if name and is_module(f"{target}.{name}", src) else target
            a, b = subpackage(here), subpackage(full)
            site = f"{here}:{line} -> {full}"
            if a in LAYER and b in LAYER and a != b and site not in edges.get((a, b), []):
                edges.setdefault((a, b), []).append(site)
    return edges


def layer_violations(edges) -> list[str]:
    return [f"{a} (layer {LAYER[a]}) may not import {b} (layer {LAYER[b]}): {', '.join(sites)}"
            for (a, b), sites in sorted(edges.items()) if LAYER[b] >= LAYER[a]]


def cycles(edges) -> list[list[str]]:
    """Every cycle of the subpackage graph, each as the path that closes it."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:   # each cycle once, from its smallest member
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def private_uses(src: Path) -> list[str]:
    """`from loopkv.x import _name`, `import loopkv.x._mod` and `module._name` on an imported loopkv
    module, in any module but the one that defines the name."""
    found = []
    for path in modules(src):
        here = module_name(path, src)
        tree = ast.parse(path.read_text(), str(path))
        bound_modules: dict[str, str] = {}   # local name -> the loopkv module it is
        for target, name, line in imports(path, src):
            if subpackage(target) is None and target != "loopkv":
                continue
            private = [p for p in [*target.split("."), *([name] if name else [])]
                       if p.startswith("_") and not p.startswith("__")]
            if private and target != here:
                found.append(f"{here}:{line} imports {private[-1]} from {target}")
            if name and is_module(f"{target}.{name}", src):
                bound_modules[name] = f"{target}.{name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and subpackage(alias.name):
                        bound_modules[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:   # `from loopkv.kernels import cpu_latent_attention as cpu`
                    if alias.asname and alias.name in bound_modules:
                        bound_modules[alias.asname] = bound_modules[alias.name]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound_modules and node.attr.startswith("_")
                    and not node.attr.startswith("__") and bound_modules[node.value.id] != here):
                found.append(f"{here}:{node.lineno} uses {bound_modules[node.value.id]}.{node.attr}")
    return found


def test_subpackages_import_only_lower_layers():
    assert layer_violations(subpackage_edges(SRC)) == []


def test_no_import_cycle_among_the_subpackages():
    assert cycles(subpackage_edges(SRC)) == []


def test_no_module_uses_another_modules_private_names():
    assert private_uses(SRC) == []


@pytest.fixture
def fake_tree(tmp_path):
    """A package laid out like loopkv with the seams the tests must catch, all in function bodies."""
    def write(relative: str, text: str) -> None:
        path = tmp_path / "loopkv" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    for package in ("", *LAYER):
        write(f"{package}/__init__.py".lstrip("/"), "")
    write("kernels/attend.py", "def _check():\n    pass\n")
    write("serve/speed.py", "def run():\n    from loopkv.kernels.attend import _check\n")
    write("cache/lla.py", "def read():\n    from loopkv.serve import speed\n    return speed._helper\n")
    write("eval/quality.py", "def rows():\n    from ..train import mixture\n")
    write("train/mixture.py", "def heldout():\n    from loopkv.eval import quality\n")
    return tmp_path


def test_the_checks_see_function_local_and_relative_imports(fake_tree):
    edges = subpackage_edges(fake_tree)
    assert layer_violations(edges) == [
        "cache (layer 1) may not import serve (layer 2): loopkv.cache.lla:2 -> loopkv.serve.speed",
        "eval (layer 2) may not import train (layer 3): loopkv.eval.quality:2 -> loopkv.train.mixture"]
    assert sorted(cycles(edges)) == [["eval", "train", "eval"]]
    assert private_uses(fake_tree) == ["loopkv.cache.lla:3 uses loopkv.serve.speed._helper",
                                       "loopkv.serve.speed:2 imports _check from loopkv.kernels.attend"]
