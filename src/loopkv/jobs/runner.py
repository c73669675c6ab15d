"""The set-up every declared command shares, done once here from its JobSpec: its flags, the
config slice it may read (nothing else), ranks, threads, device, seed, provenance of its declared
inputs, checkpoints keyed by that provenance, and start/finish log lines."""
from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

from loopkv.cli_args import add_device_arg, json_arg, named_path
from loopkv.errors import LoopKVError
from loopkv.jobs.spec import Arg, JobSpec

log = logging.getLogger(__name__)


class SliceRead(dict):
    """A config slice that refuses a read of a key its job did not declare, naming it: a command
    cannot depend on a key its rule does not track (the rule would not rerun on its edit)."""

    def __init__(self, data: dict, command: str, path: str = ""):
        super().__init__({k: SliceRead(v, command, f"{path}{k}.") if isinstance(v, dict) else v
                          for k, v in data.items()})
        self._command, self._path = command, path

    def __missing__(self, key):
        raise LoopKVError(f"{self._command} read config key '{self._path}{key}', which its JobSpec does not "
                          f"declare (declare it, so that editing it reruns the job)")

    def __reduce__(self):   # saved (torch.save, pickle) as the plain dict it is
        return dict, (dict(self),)

    def get(self, key, default=None):
        """A default only for a key that is not a config key here (an optional setting of a
        view); a config key the slice lacks was not declared."""
        if key in self:
            return self[key]
        if key in _config_keys_at(self._path):
            self.__missing__(key)
        return default


@functools.lru_cache(maxsize=None)
def _config_keys_at(path: str) -> frozenset:
    """The config keys the schema defines under a dotted path ("" the top, "melt." the section)."""
    from loopkv.config import load_schema

    node = load_schema()
    for part in path.split(".")[:-1] if path else ():
        node = node.get("properties", {}).get(part)
        if not isinstance(node, dict):
            return frozenset()
    return frozenset(node.get("properties", {}))


class Job:
    """What a command body receives: its slice, seed, device, provenance and checkpoint directory."""

    def __init__(self, spec: JobSpec, args: argparse.Namespace):
        self.spec, self.args = spec, args
        self.cfg = SliceRead(args.cfg, spec.command)
        self.wildcards = {a.dest: getattr(args, a.dest) for a in spec.wildcards}
        self.seed = self.cfg["seed"] if spec.seeded else None
        self.ranks = getattr(args, "ranks", 1)
        self.threads = getattr(args, "threads", None)
        self.device = None
        self.prov = None
        self.checkpoints: Path | None = None

    def inputs(self) -> dict[str, str]:
        """Every declared input that was given, by name (NAME=PATH inputs as name:NAME)."""
        found = {}
        for arg in self.spec.inputs:
            value = getattr(self.args, arg.dest)
            if value is None:
                continue
            if arg.kind == "named":
                found.update({f"{arg.name}:{k}": v for k, v in value})
            elif arg.kind == "paths":
                found.update({f"{arg.name}:{i}": v for i, v in enumerate(value)})
            else:
                found[arg.name] = value
        return found

    def named(self, name: str) -> dict[str, str]:
        """A NAME=PATH input as {NAME: PATH}."""
        return dict(getattr(self.args, name))

    def seed_everything(self, *tag) -> None:
        from loopkv.utils.seeding import derive_seed, seed_everything

        seed_everything(derive_seed(self.seed, *tag))

    @property
    def is_main(self) -> bool:
        """Rank 0 (or a single process): the one process that writes the outputs."""
        if not self.spec.ranks:
            return True
        from loopkv.train.launch import is_main_process

        return is_main_process()


def add_command(sub, spec: JobSpec, body: Callable[[Job], Any]) -> argparse.ArgumentParser:
    """The command's parser, every flag from its declaration; running it runs `body` under `run`."""
    p = sub.add_parser(spec.command, help=spec.help)
    if spec.reads:
        p.add_argument("--cfg", type=json_arg, required=True,
                       help="the job's config slice as JSON (loopkv.jobs.slices.job_slice of its JobSpec)")
    for arg in (*spec.wildcards, *spec.inputs, *spec.outputs, *spec.extra):
        _add_arg(p, arg)
    if spec.checkpoints:
        p.add_argument("--checkpoints", required=True, help="directory of resumable state (keyed inside by config and inputs)")
    if spec.threads:
        p.add_argument("--threads", type=int, default=1, help=f"CPU threads ({spec.threads}; not part of the result)")
    if spec.ranks:
        p.add_argument("--ranks", type=int, default=1,
                       help="DeepSpeed ranks on this node (> 1: relaunch under torchrun; not part of the result)")
    if spec.device:
        add_device_arg(p)
    if spec.progress:
        p.add_argument("--no-progress", action="store_true", help="log lines instead of progress bars")
    p.set_defaults(func=lambda args: run(spec, body, args), job_spec=spec)
    return p


def _add_arg(p: argparse.ArgumentParser, arg: Arg) -> None:
    if arg.positional:
        p.add_argument(arg.dest, nargs="+" if arg.kind == "paths" else None, help=arg.help)
    elif arg.kind == "named":
        p.add_argument(f"--{arg.name}", type=named_path, action="append", required=arg.required,
                       default=None if arg.required else [], help=arg.help)
    elif arg.kind == "paths":
        p.add_argument(f"--{arg.name}", nargs="+" if arg.required else "*", required=arg.required, default=[],
                       help=arg.help)
    else:
        p.add_argument(f"--{arg.name}", type=int if arg.kind == "int" else str, required=arg.required, help=arg.help)


def run(spec: JobSpec, body: Callable[[Job], Any], args: argparse.Namespace):
    if not spec.reads:
        args.cfg = {}
    job = Job(spec, args)
    if spec.ranks:
        from loopkv.train.launch import relaunch_on_ranks

        relaunch_on_ranks(job.ranks, args.argv)   # returns in the process that should run
    if spec.threads:
        import torch

        if job.threads < 1:
            raise LoopKVError(f"--threads must be >= 1, got {job.threads}")
        torch.set_num_threads(max(1, job.threads // job.ranks))   # the job's threads, split over its ranks
    if spec.device:
        from loopkv.utils.device import resolve_device

        job.device = resolve_device(args.device)
    from loopkv.utils.provenance import Provenance, config_hash

    job.prov = Provenance({**args.cfg, **job.wildcards}, job.seed, job.inputs())
    if spec.checkpoints:
        # keyed by config + inputs: a rerun after an edit never resumes another configuration's state
        job.checkpoints = Path(args.checkpoints) / job.prov.key()
        job.checkpoints.mkdir(parents=True, exist_ok=True)
    started = time.time()
    log.info("%s %s: config %s, inputs %s", spec.command, json.dumps(job.wildcards, sort_keys=True),
             config_hash(args.cfg), ", ".join(sorted(job.inputs())) or "none")
    result = body(job)
    log.info("%s: done in %.1f s", spec.command, time.time() - started)
    return result
