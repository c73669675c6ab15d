"""`loopkv config-check`: validate a config file before launching a (long) workflow run."""
from __future__ import annotations

import argparse

from loopkv.config import load_config


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "config-check",
        help="check a config file against the schema, cross-key rules and existing paths",
        description="Fill defaults, validate, and print 'ok: CONFIG'; errors name the dotted key.",
    )
    p.add_argument("config", help="YAML config file")
    p.add_argument("--no-paths", action="store_true",
                   help="do not require configured paths to exist (e.g. checkpoint not downloaded yet)")
    p.set_defaults(func=config_check)


def config_check(args: argparse.Namespace) -> int:
    load_config(args.config, check_paths=not args.no_paths)  # raises LoopKVError on any problem
    print(f"ok: {args.config}")
    return 0
