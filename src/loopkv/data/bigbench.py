"""BBH from the BIG-bench source tasks, where present: the `task.json` files of PyPI's bigbench==1.0.0
sdist (its metadata cannot be built offline, so `make setup` fetches the sdist itself, sha256-pinned,
into the environment; nothing of it is installed or run).

Of BBH's 23 source tasks, 20 are JSON tasks in the sdist (boolean_expressions, multistep_arithmetic
and web_of_lies are programmatic and left out). Every example with `target_scores` becomes a
log-likelihood multiple-choice row in BIG-bench's own prompt format (task prefix, input and output
prefixes); as in BBH, a seeded sample of 250 examples per (sub)task. BBH itself scores generated
answers by exact match on its own reformatted prompts: ours is the source tasks' multiple choice.
"""
from __future__ import annotations

import random
import re
import sys
import tarfile
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.utils.checked_io import check_fields, parse_json
from loopkv.utils.provenance import file_sha256

SDIST = "bigbench-1.0.0.tar.gz"
SDIST_URL = ("https://files.pythonhosted.org/packages/95/f8/c019b3579df548a04cac12342cfcb878e50ddf6cfcd7fddba8cfc721c157/"
             + SDIST)
SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
BBH_SOURCE_TASKS = (
    "causal_judgment", "date_understanding", "disambiguation_qa", "dyck_languages",
    "formal_fallacies_syllogisms_negation", "geometric_shapes", "hyperbaton", "logical_deduction",
    "movie_recommendation", "navigate", "object_counting", "penguins_in_a_table",
    "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection", "snarks",
    "sports_understanding", "temporal_sequences", "tracking_shuffled_objects", "word_sorting")
PER_TASK = 250
_MEMBER = re.compile(r"^bigbench-1\.0\.0/bigbench/benchmark_tasks/([^/]+)/(?:([^/]+)/)?task\.json$")


def sdist_path() -> Path:
    """Where `make setup` puts the sdist: inside the environment, like installed package data."""
    return Path(sys.prefix) / "share" / "loopkv" / SDIST


def fetch_sdist(dest: Path | None = None) -> Path:
    """Download the sdist from PyPI once (sha256-checked); a present, intact copy is kept."""
    import urllib.request

    dest = Path(dest or sdist_path())
    if dest.is_file() and file_sha256(dest) == SDIST_SHA256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    with urllib.request.urlopen(SDIST_URL, timeout=300) as response, open(tmp, "wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    if file_sha256(tmp) != SDIST_SHA256:
        tmp.unlink()
        raise LoopKVError(f"{SDIST} from PyPI does not have the pinned sha256 {SDIST_SHA256}")
    tmp.replace(dest)
    return dest


def _row(task: dict, example: dict) -> dict | None:
    if "target_scores" not in example:
        return None
    prefix = task.get("task_prefix") or ""
    input_prefix = task.get("example_input_prefix", "\nQ: ")
    output_prefix = task.get("example_output_prefix", "\nA: ")
    choices = list(example["target_scores"])
    scores = [example["target_scores"][c] for c in choices]
    # the answer opens with the output prefix's trailing space, as the choices carry their own
    space = " " if output_prefix.endswith(" ") else ""
    context = (prefix + input_prefix + example["input"] + output_prefix[:len(output_prefix) - len(space)]).lstrip("\n")
    return {"context": context, "choices": [space + c for c in choices], "label": scores.index(max(scores))}


def bbh_rows(sdist: Path | None = None) -> tuple[list[dict], dict]:
    """(rows, stats): BBH's source tasks' multiple-choice rows, 250 a (sub)task, in task order."""
    sdist = Path(sdist or sdist_path())
    if not sdist.is_file():
        raise LoopKVError(f"BBH needs {sdist} (PyPI bigbench==1.0.0's sdist): run `make setup` "
                          f"or `loopkv fetch-bigbench`")
    rows, stats = [], {}
    try:
        archive = tarfile.open(sdist)
        members = sorted(archive.getmembers(), key=lambda m: m.name)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise LoopKVError(f"BBH sdist {sdist} is corrupt or truncated ({type(e).__name__}: {e}); "
                          "delete it and run `loopkv fetch-bigbench`") from e
    with archive:
        for member in members:
            match = _MEMBER.match(member.name)
            if not match or match.group(1) not in BBH_SOURCE_TASKS:
                continue
            where = f"BBH sdist {sdist} member {member.name}"
            try:
                text = archive.extractfile(member).read()
            except (tarfile.TarError, EOFError, OSError, AttributeError) as e:
                raise LoopKVError(f"{where} cannot be read ({type(e).__name__}: {e})") from e
            task = check_fields(parse_json(text, where), {}, where)
            if "examples" not in task:       # a parent task that only lists its subtasks
                continue
            name = match.group(1) + (f"/{match.group(2)}" if match.group(2) else "")
            made = [r for r in (_row(task, e) for e in task["examples"]) if r is not None]
            picked = sorted(random.Random(f"bbh:{name}").sample(range(len(made)), min(PER_TASK, len(made))))
            rows += [{**made[i], "subtask": name} for i in picked]
            stats[name] = {"examples": len(task["examples"]), "multiple_choice": len(made), "kept": len(picked)}
    missing = sorted(set(BBH_SOURCE_TASKS) - {n.split("/")[0] for n in stats})
    if missing:
        raise LoopKVError(f"{sdist} lacks BBH source tasks {missing}")
    return rows, stats
