"""Argument types shared by the subcommands."""
from __future__ import annotations

import argparse
import json


def json_arg(text: str):
    """A JSON config slice (rules pass exactly the slice they track as params)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e


def named_path(text: str) -> tuple[str, str]:
    """NAME=PATH, e.g. --task passkey=results/data/tasks/passkey."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, path


def add_device_arg(parser) -> None:
    """--device: where the command computes (config launch.device; not part of any result's config)."""
    parser.add_argument("--device", default="auto",
                        help="auto (CUDA if present, per rank cuda:LOCAL_RANK), cpu, cuda, cuda:N or lazy "
                             "(see loopkv.utils.device); not part of the result")
