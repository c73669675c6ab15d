"""What a job declares. A `JobSpec` is data only (no imports of torch or the command's code), so the
Snakefile reads every declaration without loading a model library."""
from __future__ import annotations

from dataclasses import dataclass, field

# Config keys that size how a job runs, never what it computes: no slice holds them, so editing
# one reruns nothing. `*` matches one key.
RESOURCE_KEYS = ("launch", "*.threads")


@dataclass(frozen=True)
class Arg:
    """A command-line argument: a flag `--name` (or a positional) and how it is read.

    kind: "path" one file or directory; "paths" one or more; "named" NAME=PATH, repeatable; "value"
    a plain string (wildcard values such as the budget label); "int" an integer."""
    name: str
    help: str
    kind: str = "path"
    required: bool = True
    positional: bool = False

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class MethodKeys:
    """The `methods` keys a KV method needs (its class's declaration): of the method a wildcard
    names (`source="{method}"`) or of every method a config list names (`source="melt.memory_methods"`).
    `served`: the job evaluates through the method, so its read-path key counts too."""
    source: str = "{method}"
    served: bool = True


class _Absent:
    def __repr__(self) -> str:
        return "NOT_READ"


NOT_READ = _Absent()   # a View's value where the job does not read its key at all (left out of the slice)


@dataclass(frozen=True)
class View:
    """A slice entry computed from the config (e.g. one MELT recipe's stage settings), placed at
    `at`. `fn` is "module:function" called as fn(config, **wildcards); `depends` are the keys it
    may read: an edit elsewhere never reruns the job, an edit under them may. A function returning
    NOT_READ leaves `at` out of that job's slice (a key only some of a command's jobs read)."""
    at: str
    fn: str
    depends: tuple[str, ...]


@dataclass(frozen=True)
class JobSpec:
    """One command's declaration.

    reads: dotted config keys (a section or a leaf; `{wildcard}` fields are filled from the rule's
      wildcards), MethodKeys and Views. Resource keys (RESOURCE_KEYS) never enter a slice.
    skip: keys under a read that the job does not use (e.g. serve.kernel for the serving benchmark).
    wildcards: the rule's wildcards the command takes as `--name value`; part of the job's identity.
    inputs / outputs: its files; inputs are hashed into the provenance of what it writes.
    threads: the config key holding its threads; ranks: a DeepSpeed job (launch.ranks ranks, the
      threads split over them); device: it computes on a model (--device, a GPU when launch has
      some); size: its launch.jobs entry (memory and runtime requests); progress: --no-progress;
      checkpoints: --checkpoints, resumable state keyed by the slice and the inputs."""
    command: str
    help: str
    reads: tuple = ()
    skip: tuple[str, ...] = ()
    wildcards: tuple[Arg, ...] = ()
    inputs: tuple[Arg, ...] = ()
    outputs: tuple[Arg, ...] = ()
    threads: str | None = None
    ranks: bool = False
    device: bool = False
    size: str | None = None
    progress: bool = False
    checkpoints: bool = False
    extra: tuple[Arg, ...] = field(default=())   # other options that are neither files nor wildcards

    @property
    def seeded(self) -> bool:
        return "seed" in self.reads
