"""One place that decides how progress bars look, so every data command reports the same way."""
from __future__ import annotations

from tqdm import tqdm


def progress(iterable=None, *, desc: str, total: int | None = None, unit: str = "it"):
    # stderr, and updated at most once a second so Snakemake log files stay short
    return tqdm(iterable, desc=desc, total=total, unit=unit, mininterval=1.0, dynamic_ncols=True)
