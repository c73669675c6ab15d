"""The workflow's job DAG as Snakemake builds it, in this process: every job a target needs (finished
or not), its rule, wildcards, threads, benchmark file and the jobs it depends on. Read through
Snakemake's API objects (the version requirements.txt pins), so the DAG is Snakemake's own, not a
re-derivation of the rules. Used by `loopkv dag-profile` and by the workflow tests' rerun checks."""
from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from loopkv.errors import LoopKVError


@contextlib.contextmanager
def built_dag(workdir: str | Path, configfiles: Sequence[str | Path] = (), targets: Sequence[str] = (),
              cores: int = 1) -> Iterator:
    """Snakemake's DAG object of `targets` (default: the Snakefile's first rule) in `workdir`, with
    `configfiles` merged over the Snakefile's own config as `snakemake --configfile` does. Threads
    are resolved for `cores`. Snakemake's own output is swallowed; its errors are raised as
    LoopKVError with that output."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (ConfigSettings, DAGSettings, OutputSettings, ResourceSettings,
                                          StorageSettings, WorkflowSettings)

    workdir = Path(workdir).resolve()
    snakefile = workdir / "Snakefile"
    if not snakefile.is_file():
        raise LoopKVError(f"no Snakefile in {workdir}: run this in the workflow's directory")
    sink = io.StringIO()
    disabled = logging.root.manager.disable   # Snakemake's INFO lines go to handlers made before the redirect
    logging.disable(logging.INFO)
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink), \
                SnakemakeApi(OutputSettings(verbose=False)) as api:
            workflow_api = api.workflow(ResourceSettings(cores=cores),
                                        ConfigSettings(configfiles=[Path(f).resolve() for f in configfiles]),
                                        StorageSettings(), WorkflowSettings(), snakefile=snakefile, workdir=workdir)
            dag_api = workflow_api.dag(DAGSettings(targets=frozenset(targets)))
            workflow = dag_api.workflow_api._workflow
            workflow.dag_settings = dag_api.dag_settings
            workflow._prepare_dag(forceall=False, ignore_incomplete=False, lock_warn_only=True, nolock=True)
            workflow._build_dag()
            yield workflow.dag
    except LoopKVError:
        raise
    except Exception as e:   # Snakemake's own errors (no rule for a target, a bad config): its message says what
        if not type(e).__module__.startswith("snakemake"):
            raise
        raise LoopKVError(f"snakemake could not build the DAG in {workdir}: {e}\n{sink.getvalue()[-2000:]}") from e
    finally:
        logging.disable(disabled)


def job_id(job) -> tuple[str, str]:
    """(rule, its wildcards as "k=v,..." sorted): a job's name across DAG builds."""
    return job.rule.name, ",".join(f"{k}={v}" for k, v in sorted(job.wildcards_dict.items()))
