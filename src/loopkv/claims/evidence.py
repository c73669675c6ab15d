"""What a claim measures: one quantity read from this run's report files, with its interval and n.

A quantity reads a table's CSV row (an accuracy with its n gets a Wilson interval; any other number
is a point value) or a value computed from a JSON report. Anything it cannot find (a table this
configuration does not build, a row it does not run) is `Missing`, with the reason, never an error:
the claim is then "not run".
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from loopkv.errors import LoopKVError
from loopkv.stats.intervals import Estimate, newcombe_difference, wilson

NOT_RUN = "not run"   # the budget column of a table's paper-only rows (report/tables.py)


@dataclass(frozen=True)
class Measured:
    estimate: Estimate        # value, lo, hi, n; lo == hi == value for a point value
    source: str               # the file (and row) it came from
    interval: bool            # False: a point value (a byte count, a KL, a timing): no interval

    def text(self) -> str:
        e = self.estimate
        return f"{e.value:.4g} [{e.lo:.3g}, {e.hi:.3g}] (n={e.n}, {e.method})" if self.interval else f"{e.value:.4g}"


@dataclass(frozen=True)
class Missing:
    reason: str


class Reports:
    """The run's report files by name (reports/<name>), read once each."""

    def __init__(self, files: dict[str, Path]):
        self.files = {name: Path(p) for name, p in files.items()}
        self._cache: dict[str, object] = {}

    def table(self, name: str) -> list[dict] | None:
        if name not in self.files:
            return None
        if name not in self._cache:
            with open(self.files[name], newline="") as f:
                self._cache[name] = list(csv.DictReader(f))
        return self._cache[name]

    def json(self, name: str) -> dict | None:
        if name not in self.files:
            return None
        if name not in self._cache:
            try:
                self._cache[name] = json.loads(self.files[name].read_text())
            except (OSError, ValueError) as e:
                raise LoopKVError(f"{self.files[name]}: not a readable JSON report ({e})") from e
        return self._cache[name]


def _number(text: str, where: str) -> float | None:
    if text in ("", None):
        return None
    try:
        return float(text)
    except ValueError as e:
        raise LoopKVError(f"{where}: {text!r} is not a number") from e


@dataclass(frozen=True)
class Cell:
    """One table cell: the row whose columns equal `row` (and that was run), column `column`; with
    `n` the column holding its item count (an accuracy: Wilson interval), or with `bounded` the
    interval the table computed itself (<column>_lo / _hi: paired over the same items)."""
    table: str
    row: tuple[tuple[str, str], ...]
    column: str
    n: str | None = None
    bounded: bool = False

    def describe(self) -> str:
        return f"{self.table}.csv [{', '.join(f'{k}={v}' for k, v in self.row)}] {self.column}"

    def measure(self, reports: Reports) -> Measured | Missing:
        rows = reports.table(self.table)
        if rows is None:
            return Missing(f"{self.table} is not built by this configuration")
        match = [r for r in rows if all(r.get(k) == v for k, v in self.row) and r.get("budget") != NOT_RUN]
        if not match:
            return Missing(f"{self.table} has no measured row {dict(self.row)}")
        where = f"{reports.files[self.table]} row {dict(self.row)}"
        value = _number(match[0].get(self.column, ""), f"{where} column {self.column}")
        if value is None:
            return Missing(f"{self.table} row {dict(self.row)} has no {self.column}")
        if self.n is None:
            return Measured(Estimate(value, value, value, 1, "point"), where, False)
        n = int(_number(match[0][self.n], f"{where} column {self.n}"))
        if self.bounded:
            lo, hi = (_number(match[0].get(f"{self.column}_{end}", ""), f"{where} column {self.column}_{end}")
                      for end in ("lo", "hi"))
            if lo is None or hi is None:
                return Missing(f"{self.table} row {dict(self.row)} has no interval for {self.column}")
            return Measured(Estimate(value, lo, hi, n, "paired"), where, True)
        return Measured(wilson(round(value * n), n), where, True)


@dataclass(frozen=True)
class Computed:
    """A point value computed from JSON reports (fn(*documents) -> float); `what` says how."""
    files: tuple[str, ...]
    fn: Callable
    what: str

    def describe(self) -> str:
        return f"{self.what} ({', '.join(self.files)})"

    def measure(self, reports: Reports) -> Measured | Missing:
        docs = [reports.json(f) for f in self.files]
        if any(d is None for d in docs):
            return Missing(f"{', '.join(f for f, d in zip(self.files, docs) if d is None)} not built by this configuration")
        try:
            value = float(self.fn(*docs))
        except (KeyError, IndexError, StopIteration, TypeError, ValueError, ZeroDivisionError) as e:
            return Missing(f"{self.what}: not in this run's {', '.join(self.files)} ({type(e).__name__}: {e})")
        return Measured(Estimate(value, value, value, 1, "point"), ", ".join(str(reports.files[f]) for f in self.files),
                        False)


def difference(a: Measured, b: Measured) -> Measured:
    """a - b: Newcombe's interval when both are accuracies, else a point difference."""
    source = f"{a.source} minus {b.source}"
    if a.interval and b.interval:
        if {a.estimate.method, b.estimate.method} != {"wilson"}:
            raise LoopKVError(f"{source}: Newcombe's interval needs two accuracies with Wilson intervals, got "
                              f"{a.estimate.method} and {b.estimate.method} (use the table's paired column instead)")
        ea, eb = a.estimate, b.estimate
        return Measured(newcombe_difference(round(ea.value * ea.n), ea.n, round(eb.value * eb.n), eb.n), source, True)
    d = a.estimate.value - b.estimate.value
    return Measured(Estimate(d, d, d, 1, "point"), source, False)


def cell(table: str, column: str, n: str | None = None, bounded: bool = False, **row: str) -> Cell:
    return Cell(table, tuple(row.items()), column, n, bounded)
