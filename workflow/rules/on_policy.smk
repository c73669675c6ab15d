# On-policy codec distillation (LLA Eq. 6-7) after the off-policy one, evaluated like a Table 1 cell;
# LLA Table 4 (off- vs on-policy per budget) and Figure 7 (exposure curves).


rule distill_on_policy:
    input:
        teacher=f"{teacher_dir()}/config.json",
        init=R("distill/{method}/{budget}/codec.pt"),
        corpus=R("data/corpus/manifest.json"),
        prompts=expand(R("data/tasks/{task}/manifest.json"), task=config["on_policy"]["prompts"]),
    output:
        codec=R("on_policy/{method}/{budget}/codec.pt"),
        curve=R("on_policy/{method}/{budget}/curve.json"),
    wildcard_constraints:
        method="|".join(CODEC_METHODS),
    params:
        cfg=lambda w: on_policy_cfg(w),
        seed=config["seed"],
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        prompts=flag_args(("--prompts", f"{t}={R(f'data/tasks/{t}')}") for t in config["on_policy"]["prompts"]),
        checkpoints=lambda w: R(f"on_policy/{w.method}/{w.budget}/checkpoints"),
    threads: config["on_policy"]["threads"] * TRAIN_RANKS   # every rank's threads (the command splits them)
    resources:
        **job_size("train"),
        device=DEVICE,
        nodes=1,                 # torchrun --standalone: every rank on one node
        ranks=TRAIN_RANKS,
        gpu=TRAIN_GPUS,
    log:
        f"{LOGS}/on_policy/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/on_policy/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv distill-on-policy --cfg {params.cfg:q} --seed {params.seed:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} --init {input.init:q} --corpus {params.corpus:q}"
        " {params.prompts} --out {output.codec:q} --curve {output.curve:q} --checkpoints {params.checkpoints:q}"
        " --threads {threads:q} --ranks {resources.ranks:q} --no-progress --device {resources.device:q} > {log:q} 2>&1"


rule on_policy_eval:
    input:
        codec=R("on_policy/{method}/{budget}/codec.pt"),
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/test.jsonl"), task=TASKS),
    output:
        metrics=R("on_policy/{method}/{budget}/quality.json"),
        samples=R("on_policy/{method}/{budget}/quality_samples.json"),
    params:
        cfg=lambda w: cell_cfg("method_eval", w),
        seed=config["seed"],
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
    threads: config["method_eval"]["threads"]
    resources:
        **job_size("eval"),
        device=DEVICE,
        gpu=MODEL_GPUS,
    log:
        f"{LOGS}/on_policy/{{method}}_{{budget}}_eval.log",
    benchmark:
        f"{LOGS}/benchmarks/on_policy/{{method}}_{{budget}}_eval.tsv"
    shell:
        "loopkv method-eval --cfg {params.cfg:q} --seed {params.seed:q} --method {wildcards.method:q}"
        " --budget {wildcards.budget:q} --teacher {params.teacher:q} --codec {input.codec:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.metrics:q} --samples {output.samples:q}"
        " --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule table4_fig7:
    input:
        teacher=R("methods/full/1x/quality_samples.json"),
        off=[R(f"methods/{ON_POLICY_METHOD}/{b}/quality.json") for b in ON_POLICY_BUDGETS],
        off_samples=[R(f"methods/{ON_POLICY_METHOD}/{b}/quality_samples.json") for b in ON_POLICY_BUDGETS],
        on=[R(f"on_policy/{ON_POLICY_METHOD}/{b}/quality.json") for b in ON_POLICY_BUDGETS],
        on_samples=[R(f"on_policy/{ON_POLICY_METHOD}/{b}/quality_samples.json") for b in ON_POLICY_BUDGETS],
        off_curves=[R(f"distill/{ON_POLICY_METHOD}/{b}/curve.json") for b in ON_POLICY_BUDGETS],
        on_curves=[R(f"on_policy/{ON_POLICY_METHOD}/{b}/curve.json") for b in ON_POLICY_BUDGETS],
    output:
        table_pdf=f"{REPORTS}/table4.pdf",
        table_csv=f"{REPORTS}/table4.csv",
        table_tex=f"{REPORTS}/table4.tex",
        fig_pdf=f"{REPORTS}/fig7_exposure.pdf",
        fig_png=f"{REPORTS}/fig7_exposure.png",
        fig_json=f"{REPORTS}/fig7_exposure.json",
    params:
        bins=config["on_policy"]["exposure_bin_tokens"],
        dpi=config["report"]["dpi"],
    log:
        f"{LOGS}/report/table4_fig7.log",
    shell:
        "loopkv table4-fig7 --teacher-samples {input.teacher:q} --off {input.off:q} --on {input.on:q}"
        " --off-curves {input.off_curves:q} --on-curves {input.on_curves:q} --bin-tokens {params.bins:q} --dpi {params.dpi:q}"
        " --table-pdf {output.table_pdf:q} --table-csv {output.table_csv:q} --table-tex {output.table_tex:q}"
        " --fig-pdf {output.fig_pdf:q} --fig-png {output.fig_png:q} --fig-json {output.fig_json:q} > {log:q} 2>&1"
