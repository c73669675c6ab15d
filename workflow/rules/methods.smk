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
        cfg=lambda w: cell_cfg("distill", w),
        seed=config["seed"],
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in DISTILL_TASKS}),
        checkpoints=lambda w: R(f"distill/{w.method}/{w.budget}/checkpoints"),
    threads: config["distill"]["threads"] * TRAIN_RANKS   # every rank's threads (the command splits them)
    resources:
        **job_size("train"),
        device=DEVICE,
        nodes=1,                 # torchrun --standalone: every rank on one node
        ranks=TRAIN_RANKS,
        gpu=TRAIN_GPUS,
    log:
        f"{LOGS}/distill/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/distill/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv distill --cfg {params.cfg:q} --seed {params.seed:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} --calibration {input.calibration:q}"
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
        cfg=lambda w: cell_cfg("method_eval", w),
        seed=config["seed"],
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
        codec=lambda w, input: flag_args([("--codec", input.codec)] if "codec" in input.keys() else []),
    threads: config["method_eval"]["threads"]
    resources:
        **job_size("eval"),
        device=DEVICE,
        gpu=MODEL_GPUS,
    log:
        f"{LOGS}/methods/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/methods/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv method-eval --cfg {params.cfg:q} --seed {params.seed:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} {params.codec}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.metrics:q} --samples {output.samples:q}"
        " --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"
