# loopkv: KV compression for looped LMs, from data to tables. Thin on purpose: the rules live in
# workflow/rules (one file per stage), the config is validated in common.smk before any job runs.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# `snakemake --report reports/report.html`: this page first, then every table and figure (README)
report: "workflow/report/workflow.rst"


# rules find the `loopkv` command through PATH (see common.smk)
envvars:
    "PATH",


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/teacher.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/methods.smk"
include: "workflow/rules/melt.smk"
include: "workflow/rules/lm_eval.smk"
include: "workflow/rules/on_policy.smk"
include: "workflow/rules/serve.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        default_targets(),
    default_target: True
