"""Job declarations: each `loopkv` command a rule calls states, in one `JobSpec` next to its code,
the config keys it reads, its resources and its inputs and outputs (spec.py). From that one
declaration come the config slice the rule passes (slices.py), the command's flags and the set-up
every command shares: seeding, provenance, checkpoints, threads, ranks, device (runner.py)."""
from loopkv.jobs.spec import Arg, JobSpec, MethodKeys, View

__all__ = ["Arg", "JobSpec", "MethodKeys", "View"]
