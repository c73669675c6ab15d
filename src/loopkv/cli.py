"""`loopkv` command line: the subcommands the Snakemake rules call.

Each area of the package contributes its subcommands through a `register(subparsers)` function, so
this file only assembles them. Rules pass the config slice they use as JSON (`--cfg`), so that the
command sees exactly what Snakemake tracks as the rule's params.

A user-facing error (LoopKVError: bad input, a corrupt or missing file) is printed without a
traceback, exit status 2; `loopkv --debug <command> ...` (or LOOPKV_DEBUG=1) shows the traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from loopkv.errors import LoopKVError

# modules with a `register(subparsers)` function, in the order they appear in --help
_COMMAND_MODULES = (
    "loopkv.data.commands",
    "loopkv.models.commands",
    "loopkv.train.commands",
    "loopkv.eval.commands",
    "loopkv.eval.lm_commands",
    "loopkv.analysis.commands",
    "loopkv.serve.commands",
    "loopkv.report.commands",
    "loopkv.config_commands",
    "loopkv.verify",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopkv", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="on an error, show its traceback (also with LOOPKV_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def prepare_numerics(command: str) -> None:
    """Reproducible MKL for every command but the speed/memory benchmarks (utils/numerics.py)."""
    from loopkv.serve.commands import TIMING_COMMANDS
    from loopkv.utils.numerics import reproducible_mkl

    if command not in TIMING_COMMANDS:
        reproducible_mkl()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # a training command may relaunch itself
    prepare_numerics(args.command)
    try:
        result = args.func(args)
    except LoopKVError as e:
        if args.debug or os.environ.get("LOOPKV_DEBUG", "") not in ("", "0"):
            raise
        print(f"loopkv {args.command}: error: {e}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
