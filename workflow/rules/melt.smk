# MELT: two training stages per recipe (the full recipe and its ablations), the streamed evaluation
# of every recipe at MELT's budget, and the memory measurement. Stage jobs are keyed by the recipe
# that owns them: recipes with equal stage settings share one job (e.g. no_stage2 = full's stage 1).


wildcard_constraints:
    recipe="[A-Za-z0-9_]+",


rule melt_stage1:
    input:
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/manifest.json"), task=MELT_TASKS),
    output:
        R("melt/{recipe}/stage1/model/model.safetensors"),
        R("melt/{recipe}/stage1/model/config.json"),
        curve=R("melt/{recipe}/stage1/model/train_curve.json"),
    params:
        cfg=job_cfg("melt-train", stage=1),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in MELT_TASKS}),
        out=parent("curve"),
        checkpoints=lambda w: R(f"melt/{w.recipe}/stage1/checkpoints"),
    threads: job_threads("melt-train")
    resources:
        **job_resources("melt-train"),
    log:
        f"{LOGS}/melt/{{recipe}}_stage1.log",
    benchmark:
        f"{LOGS}/benchmarks/melt/{{recipe}}_stage1.tsv"
    shell:
        "loopkv melt-train --cfg {params.cfg:q} --teacher {params.teacher:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {params.out:q} --checkpoints {params.checkpoints:q}"
        " --threads {threads:q} --ranks {resources.ranks:q} --no-progress --device {resources.device:q} > {log:q} 2>&1"


rule melt_stage2:
    input:
        init=lambda w: f"{melt_stage_dir(w.recipe, 1)}/config.json",
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/manifest.json"), task=MELT_TASKS),
    output:
        R("melt/{recipe}/stage2/model/model.safetensors"),
        R("melt/{recipe}/stage2/model/config.json"),
        curve=R("melt/{recipe}/stage2/model/train_curve.json"),
    params:
        cfg=job_cfg("melt-train", stage=2),
        init=parent("init"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in MELT_TASKS}),
        out=parent("curve"),
        checkpoints=lambda w: R(f"melt/{w.recipe}/stage2/checkpoints"),
    threads: job_threads("melt-train")
    resources:
        **job_resources("melt-train"),
    log:
        f"{LOGS}/melt/{{recipe}}_stage2.log",
    benchmark:
        f"{LOGS}/benchmarks/melt/{{recipe}}_stage2.tsv"
    shell:
        "loopkv melt-train --cfg {params.cfg:q} --teacher {params.teacher:q}"
        " --init {params.init:q} --corpus {params.corpus:q} {params.tasks} --out {params.out:q}"
        " --checkpoints {params.checkpoints:q} --threads {threads:q} --ranks {resources.ranks:q} --no-progress --device {resources.device:q} > {log:q} 2>&1"


rule melt_eval:
    input:
        student=lambda w: f"{melt_model_dir(w.recipe)}/config.json",
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/test.jsonl"), task=TASKS),
    output:
        metrics=R("melt/{recipe}/quality.json"),
        samples=R("melt/{recipe}/quality_samples.json"),
    params:
        cfg=job_cfg("method-eval", method="melt", budget=MELT_BUDGET),
        budget=MELT_BUDGET,
        student=parent("student"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
    threads: job_threads("method-eval")
    resources:
        **job_resources("method-eval"),
    log:
        f"{LOGS}/melt/{{recipe}}_eval.log",
    benchmark:
        f"{LOGS}/benchmarks/melt/{{recipe}}_eval.tsv"
    shell:
        "loopkv method-eval --cfg {params.cfg:q} --method melt --budget {params.budget:q}"
        " --teacher {params.teacher:q} --student {params.student:q} --corpus {params.corpus:q} {params.tasks}"
        " --out {output.metrics:q} --samples {output.samples:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule melt_table:
    input:
        cells=lambda w: [R(f"melt/{n}/quality.json") for n in melt_table_recipes(w.which)],
        curves=lambda w: [f"{melt_model_dir(n)}/train_curve.json" for n in melt_table_recipes(w.which)],
    output:
        pdf=f"{REPORTS}/melt_table{{which}}.pdf",
        csv=f"{REPORTS}/melt_table{{which}}.csv",
        tex=f"{REPORTS}/melt_table{{which}}.tex",
    wildcard_constraints:
        which="3|4",
    params:
        cfg=job_cfg("melt-table"),
        cells=lambda w: flag_args(("--cell", f"{n}={R(f'melt/{n}/quality.json')}") for n in melt_table_recipes(w.which)),
        curves=lambda w: flag_args(("--curve", f"{n}={melt_model_dir(n)}/train_curve.json") for n in melt_table_recipes(w.which)),
    log:
        f"{LOGS}/report/melt_table{{which}}.log",
    benchmark:
        f"{LOGS}/benchmarks/report/melt_table{{which}}.tsv"
    shell:
        "loopkv melt-table --cfg {params.cfg:q} --which {wildcards.which:q} {params.cells} {params.curves}"
        " --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q}"
        " > {log:q} 2>&1"


rule melt_vs_lla:
    input:
        teacher=R("methods/full/1x/quality.json"),
        melt=R("melt/full/quality.json"),
        cells=[R(f"methods/{m}/{MELT_BUDGET}/quality.json") for m in config["melt"]["compare_methods"]],
    output:
        pdf=f"{REPORTS}/melt_vs_lla.pdf",
        csv=f"{REPORTS}/melt_vs_lla.csv",
        tex=f"{REPORTS}/melt_vs_lla.tex",
    params:
        cfg=job_cfg("melt-vs-lla"),
    log:
        f"{LOGS}/report/melt_vs_lla.log",
    benchmark:
        f"{LOGS}/benchmarks/report/melt_vs_lla.tsv"
    shell:
        "loopkv melt-vs-lla --cfg {params.cfg:q} --teacher-cell {input.teacher:q} --melt-cell {input.melt:q} --cells {input.cells:q}"
        " --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule melt_memory:
    input:
        teacher=f"{teacher_dir()}/config.json",
        student=f"{melt_model_dir('full')}/config.json",
        codecs=[R(f"distill/{m}/{MELT_BUDGET}/codec.pt") for m in MEMORY_CODECS],
    output:
        R("melt/memory.json"),
    params:
        cfg=job_cfg("melt-memory", budget=MELT_BUDGET),
        teacher=parent("teacher"),
        student=parent("student"),
        budget=MELT_BUDGET,
        codecs=flag_args(("--codec", f"{m}={R(f'distill/{m}/{MELT_BUDGET}/codec.pt')}") for m in MEMORY_CODECS),
    threads: job_threads("melt-memory")
    resources:
        **job_resources("melt-memory"),
    log:
        f"{LOGS}/melt/memory.log",
    benchmark:
        f"{LOGS}/benchmarks/melt/memory.tsv"
    shell:
        "loopkv melt-memory --cfg {params.cfg:q} --teacher {params.teacher:q} --student {params.student:q}"
        " --budget {params.budget:q} {params.codecs} --out {output:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule fig_memory:
    input:
        R("melt/memory.json"),
    output:
        pdf=f"{REPORTS}/fig_memory_vs_length.pdf",
        png=report(f"{REPORTS}/fig_memory_vs_length.png", caption="../report/fig_memory_vs_length.rst",
                   category=REPORT_CATEGORIES["melt"], labels={"result": "MELT: memory against generated tokens"}),
        json=f"{REPORTS}/fig_memory_vs_length.json",
    params:
        cfg=job_cfg("fig-memory"),
    log:
        f"{LOGS}/report/fig_memory.log",
    benchmark:
        f"{LOGS}/benchmarks/report/fig_memory.tsv"
    shell:
        "loopkv fig-memory --cfg {params.cfg:q} --memory {input:q} --pdf {output.pdf:q} --png {output.png:q}"
        " --json {output.json:q} > {log:q} 2>&1"
