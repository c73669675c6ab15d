# KV methods at equal cache budgets: codec distillation (lla, lla2d, mla_head) and the streamed
# evaluation of every (method, budget) cell of Table 1.


wildcard_constraints:
    budget="[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}",   # the schema's label pattern: nothing a shell would read


rule distill:
    input:
        teacher=f"{teacher_dir()}/config.json",
        calibration=R("calibration/calibration.pt"),
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/manifest.json"), task=DISTILL_TASKS),
    output:
        codec=R("distill/{method}/{budget}/codec.pt"),
        curve=R("distill/{method}/{budget}/curve.json"),
    wildcard_constraints:
        method="|".join(CODEC_METHODS),
    params:
        cfg=job_cfg("distill"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in DISTILL_TASKS}),
        checkpoints=lambda w: R(f"distill/{w.method}/{w.budget}/checkpoints"),
    threads: job_threads("distill")
    resources:
        **job_resources("distill"),
    log:
        f"{LOGS}/distill/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/distill/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv distill --cfg {params.cfg:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} --calibration {input.calibration:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.codec:q} --curve {output.curve:q}"
        " --checkpoints {params.checkpoints:q} --threads {threads:q} --ranks {resources.ranks:q} --no-progress --device {resources.device:q} > {log:q} 2>&1"


# LLA Table 10's variants (lla: the distill rule's command with one thing changed) and Table 14's
# (lla_decoupled: decoupled RoPE), on the short schedule
rule distill_ablation:
    input:
        teacher=f"{teacher_dir()}/config.json",
        calibration=R("calibration/calibration.pt"),
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/manifest.json"), task=DISTILL_TASKS),
    output:
        codec=R("ablations/{method}/{budget}/{variant}/codec.pt"),
        curve=R("ablations/{method}/{budget}/{variant}/curve.json"),
    wildcard_constraints:
        method="lla|lla_decoupled",
        variant="|".join(DISTILL_ABLATIONS + DECOUPLED_VARIANTS) or "^$",
    params:
        cfg=job_cfg("distill-ablation"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in DISTILL_TASKS}),
        checkpoints=lambda w: R(f"ablations/{w.method}/{w.budget}/{w.variant}/checkpoints"),
    threads: job_threads("distill")
    resources:
        **job_resources("distill-ablation"),
    log:
        f"{LOGS}/ablations/{{method}}_{{budget}}_{{variant}}.log",
    benchmark:
        f"{LOGS}/benchmarks/ablations/{{method}}_{{budget}}_{{variant}}.tsv"
    shell:
        "loopkv distill-ablation --cfg {params.cfg:q} --method {wildcards.method:q} --budget {wildcards.budget:q}"
        " --variant {wildcards.variant:q} --teacher {params.teacher:q} --calibration {input.calibration:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.codec:q} --curve {output.curve:q}"
        " --checkpoints {params.checkpoints:q} --threads {threads:q} --ranks {resources.ranks:q} --no-progress --device {resources.device:q} > {log:q} 2>&1"


rule method_eval:
    input:
        unpack(method_eval_codec),
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/test.jsonl"), task=TASKS),
    output:
        metrics=R("methods/{method}/{budget}/quality.json"),
        samples=R("methods/{method}/{budget}/quality_samples.json"),
    params:
        cfg=job_cfg("method-eval"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
        codec=lambda w, input: flag_args([("--codec", input.codec)] if "codec" in input.keys() else []),
    threads: job_threads("method-eval")
    resources:
        **job_resources("method-eval"),
    log:
        f"{LOGS}/methods/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/methods/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv method-eval --cfg {params.cfg:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} {params.codec}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.metrics:q} --samples {output.samples:q}"
        " --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


# LLA Table 9: a cell of eviction.methods, its caches evicting (attention sinks + a recent window)
rule eviction_eval:
    input:
        unpack(method_eval_codec),
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/test.jsonl"), task=TASKS),
    output:
        metrics=R("eviction/{method}/{budget}/quality.json"),
        samples=R("eviction/{method}/{budget}/quality_samples.json"),
    params:
        cfg=job_cfg("eviction-eval"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
        codec=lambda w, input: flag_args([("--codec", input.codec)] if "codec" in input.keys() else []),
    threads: job_threads("eviction-eval")
    resources:
        **job_resources("eviction-eval"),
    log:
        f"{LOGS}/eviction/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/eviction/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv eviction-eval --cfg {params.cfg:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} {params.codec}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.metrics:q} --samples {output.samples:q}"
        " --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"
