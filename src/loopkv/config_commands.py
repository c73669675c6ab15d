"""`loopkv config-check`: validate the config a Snakemake run would use, before launching a (long) one.

It reads its arguments as `snakemake --configfile FILES --config KEY=VALUE` does: the files parsed as
Snakemake parses them (JSON, else YAML through YTE), merged in order over the workflow's own
config/config.yaml (in the working directory) with Snakemake's merge, --config values on top; then
the Snakefile's validation (workflow/rules/common.smk: schema defaults, schema, cross-key rules,
paths). So it accepts exactly what `snakemake -n` accepts there, and names the key Snakemake's run
would stop at.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loopkv.config import WORKFLOW_CONFIGFILE, load_workflow_config


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "config-check",
        help="check the config a Snakemake run would use: schema, cross-key rules and paths",
        description="Merge the config files over config/config.yaml as Snakemake does, fill defaults, validate, "
                    "and print 'ok: FILES'; errors name the dotted key.",
    )
    p.add_argument("config", nargs="*", default=[],
                   help="config files, as snakemake --configfile takes them (later ones override earlier ones)")
    p.add_argument("--configfile", "--configfiles", dest="configfiles", nargs="+", action="extend", default=[],
                   metavar="FILE", help="more config files, after the positional ones (snakemake's option)")
    p.add_argument("--config", "-C", dest="config_args", nargs="*", action="extend", default=[],
                   metavar="KEY=VALUE", help="top-level values set on top, parsed as snakemake --config parses them")
    p.add_argument("--replace-workflow-config", action="store_true",
                   help="the files replace config/config.yaml instead of being merged over it (snakemake's option)")
    p.add_argument("--workflow-config", default=WORKFLOW_CONFIGFILE, metavar="FILE",
                   help=f"the Snakefile's own config file (default: {WORKFLOW_CONFIGFILE}, in the working directory)")
    p.add_argument("--no-paths", action="store_true",
                   help="do not require configured paths to exist (e.g. checkpoint not downloaded yet); the "
                        "results, reports and logs directories are still checked")
    p.add_argument("--print-config", action="store_true",
                   help="print the merged, completed config as JSON (what the rules read) after 'ok'")
    p.set_defaults(func=config_check)


def config_check(args: argparse.Namespace) -> int:
    files = [*args.config, *args.configfiles]
    config = load_workflow_config(files, args.config_args, workflow_configfile=args.workflow_config,
                                  replace_workflow_config=args.replace_workflow_config,
                                  check_paths=not args.no_paths)   # raises LoopKVError on any problem
    base = "" if files else args.workflow_config
    named = " ".join([*map(str, files), *(f"--config {a}" for a in args.config_args)])
    print(f"ok: {named or base}")
    if files and not Path(args.workflow_config).exists():
        print(f"note: no {args.workflow_config} here: checked the files alone, as Snakemake run here would")
    if args.print_config:
        print(json.dumps(config, indent=1, sort_keys=True))
    return 0
