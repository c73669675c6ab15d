"""`loopkv config-check` and `loopkv config-show`: the config a Snakemake run would use, checked or
printed before launching a (long) one.

Both read their arguments as `snakemake --configfile FILES --config KEY=VALUE` does: the files parsed
as Snakemake parses them (JSON, else YAML through YTE), merged in order over the workflow's own
config/config.yaml (in the working directory) with Snakemake's merge, --config values on top; then
the Snakefile's completion and validation (workflow/rules/common.smk: config/config.yaml under
everything, schema, registries, cross-key rules, paths). So they accept exactly what `snakemake -n`
accepts there, and name the key Snakemake's run would stop at.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from loopkv.config import WORKFLOW_CONFIGFILE, load_schema, load_workflow_config


def register(subparsers) -> None:
    check = subparsers.add_parser(
        "config-check",
        help="check the config a Snakemake run would use: schema, cross-key rules and paths",
        description="Merge the config files over config/config.yaml as Snakemake does, validate, "
                    "and print 'ok: FILES'; errors name the dotted key.",
    )
    _add_config_arguments(check)
    check.add_argument("--print-config", action="store_true",
                       help="print the merged, completed config as JSON (what the rules read) after 'ok'")
    check.set_defaults(func=config_check)
    show = subparsers.add_parser(
        "config-show",
        help="print the config a Snakemake run would use, as YAML",
        description="Merge the config files over config/config.yaml as Snakemake does, validate, and print "
                    "the whole config as YAML, keys in schema order; errors name the dotted key.",
    )
    _add_config_arguments(show)
    show.set_defaults(func=config_show)


def _add_config_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments that name a config, as snakemake's command line does (both commands take them)."""
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


def _load(args: argparse.Namespace) -> dict:
    """The merged, validated config the arguments name (raises LoopKVError naming the key)."""
    return load_workflow_config([*args.config, *args.configfiles], args.config_args,
                                workflow_configfile=args.workflow_config,
                                replace_workflow_config=args.replace_workflow_config, check_paths=not args.no_paths)


def config_check(args: argparse.Namespace) -> int:
    files = [*args.config, *args.configfiles]
    config = _load(args)
    base = "" if files else args.workflow_config
    named = " ".join([*map(str, files), *(f"--config {a}" for a in args.config_args)])
    print(f"ok: {named or base}")
    if files and not Path(args.workflow_config).exists():
        print(f"note: no {args.workflow_config} here: checked the files alone, as Snakemake run here would")
    if args.print_config:
        print(json.dumps(config, indent=1, sort_keys=True))
    return 0


def config_show(args: argparse.Namespace) -> int:
    config = _load(args)
    print(yaml.dump(in_schema_order(config, load_schema()), Dumper=_ConfigDumper, sort_keys=False, width=110), end="")
    return 0


class _Inline(dict):
    """A mapping written on one line (an lm_eval.tasks entry, as config/config.yaml writes it)."""


class _ConfigDumper(yaml.SafeDumper):
    """YAML laid out as config/config.yaml is: mappings in block style, a list of plain values on one
    line, a list of mappings one `- {...}` line per entry."""

    def represent_list(self, data):
        inline = all(not isinstance(item, (dict, list)) for item in data)
        items = [_Inline(item) if isinstance(item, dict) else item for item in data]
        return self.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=inline)

    def represent_inline(self, data):
        return self.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)


_ConfigDumper.add_representer(list, _ConfigDumper.represent_list)
_ConfigDumper.add_representer(_Inline, _ConfigDumper.represent_inline)


def in_schema_order(node: Any, schema: dict) -> Any:
    """A validated config with every mapping's named keys in the schema's order (as config/config.yaml
    and the schema's descriptions read); a label-keyed mapping and a list keep their own order, which
    the tables follow."""
    if isinstance(node, dict) and "properties" in schema:
        named = schema["properties"]
        return {key: in_schema_order(node[key], named[key]) for key in named if key in node}
    if isinstance(node, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {key: in_schema_order(value, schema["additionalProperties"]) for key, value in node.items()}
    if isinstance(node, list) and isinstance(schema.get("items"), dict):
        return [in_schema_order(item, schema["items"]) for item in node]
    return node
