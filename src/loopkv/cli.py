"""`loopkv` command line: the subcommands the Snakemake rules call.

Each area of the package contributes its subcommands through a `register(subparsers)` function, so
this file only assembles them. Rules pass the config slice they use as JSON (`--cfg`), so that the
command sees exactly what Snakemake tracks as the rule's params.

A user-facing error (LoopKVError: bad input, a corrupt or missing file) is printed without a
traceback, exit status 2; `loopkv --debug <command> ...` (or LOOPKV_DEBUG=1) shows the traceback.
Log lines (time, level, logger) go to stderr from INFO up, loopkv's own from DEBUG up under --debug;
the rules send a job's stdout and stderr to its log file.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from loopkv.errors import LoopKVError

# modules with a `register(subparsers)` function, in the order they appear in --help
COMMAND_MODULES = (
    "loopkv.data.commands",
    "loopkv.models.commands",
    "loopkv.train.commands",
    "loopkv.eval.commands",
    "loopkv.eval.lm_commands",
    "loopkv.analysis.commands",
    "loopkv.serve.commands",
    "loopkv.report.commands",
    "loopkv.report.html_commands",
    "loopkv.config_commands",
    "loopkv.claims.commands",
    "loopkv.verify",
    "loopkv.jobs.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopkv", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="log loopkv's DEBUG lines and, on an error, show its traceback (also with LOOPKV_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def configure_logging(debug: bool) -> None:
    """INFO and up to stderr, with time and logger (a process whose root logger already has handlers,
    e.g. under pytest, keeps them)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if debug:   # loopkv's own DEBUG lines, not every library's
        logging.getLogger("loopkv").setLevel(logging.DEBUG)


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
    debug = args.debug or os.environ.get("LOOPKV_DEBUG", "") not in ("", "0")
    configure_logging(debug)
    prepare_numerics(args.command)
    try:
        result = args.func(args)
    except LoopKVError as e:
        if debug:
            raise
        print(f"loopkv {args.command}: error: {e}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
