"""Every declared job, by command name, collected from the command modules' JobSpecs."""
from __future__ import annotations

import functools
import importlib

from loopkv.errors import LoopKVError
from loopkv.jobs.spec import JobSpec


@functools.lru_cache(maxsize=None)
def job_specs() -> dict[str, JobSpec]:
    from loopkv.cli import COMMAND_MODULES

    specs: dict[str, JobSpec] = {}
    for name in COMMAND_MODULES:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, JobSpec):
                if value.command in specs and specs[value.command] is not value:
                    raise LoopKVError(f"two JobSpecs declare command {value.command!r}")
                specs[value.command] = value
    return specs


def job_spec(command: str) -> JobSpec:
    try:
        return job_specs()[command]
    except KeyError:
        raise LoopKVError(f"no JobSpec declares command {command!r}") from None
