# The teacher: pretrained from scratch (embedded default) or a real checkpoint given by path.


if not pretrained():

    rule teacher_pretrain:
        input:
            corpus=R("data/corpus/manifest.json"),
            tokenizer=R("data/tokenizer/manifest.json"),
            tasks=expand(R("data/tasks/{task}/manifest.json"), task=TRAIN_TASKS),
        output:
            R("teacher/model/model.safetensors"),
            R("teacher/model/config.json"),
            curve=R("teacher/model/train_curve.json"),
        params:
            cfg=job_cfg("teacher-pretrain"),
            tasks=task_args({t: R(f"data/tasks/{t}") for t in TRAIN_TASKS}),
            out=parent("curve"),
            corpus=parent("corpus"),
            tokenizer=parent("tokenizer"),
            checkpoints=R("teacher/checkpoints"),
        threads: job_threads("teacher-pretrain")
        resources:
            **job_resources("teacher-pretrain"),
        log:
            f"{LOGS}/teacher/pretrain.log",
        benchmark:
            f"{LOGS}/benchmarks/teacher/pretrain.tsv"
        shell:
            "loopkv teacher-pretrain --cfg {params.cfg:q}"
            " --corpus {params.corpus:q} --tokenizer {params.tokenizer:q} {params.tasks}"
            " --out {params.out:q} --checkpoints {params.checkpoints:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule teacher_eval:
    input:
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/test.jsonl"), task=TASKS),
    output:
        metrics=R("teacher/quality.json"),
        samples=R("teacher/quality_samples.json"),
    params:
        cfg=job_cfg("teacher-eval"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
    threads: job_threads("teacher-eval")
    resources:
        **job_resources("teacher-eval"),
    log:
        f"{LOGS}/teacher/eval.log",
    benchmark:
        f"{LOGS}/benchmarks/teacher/eval.tsv"
    shell:
        "loopkv teacher-eval --cfg {params.cfg:q} --teacher {params.teacher:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.metrics:q} --samples {output.samples:q}"
        " --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


# The teacher at each test-time depth of teacher_eval.loop_depths (Huginn's steps, Ouro's exit loop)
rule teacher_depth:
    input:
        R("teacher/quality.json"),
    output:
        pdf=f"{REPORTS}/teacher_depth.pdf",
        csv=f"{REPORTS}/teacher_depth.csv",
        tex=f"{REPORTS}/teacher_depth.tex",
    params:
        cfg=job_cfg("teacher-depth"),
    log:
        f"{LOGS}/report/teacher_depth.log",
    benchmark:
        f"{LOGS}/benchmarks/report/teacher_depth.tsv"
    shell:
        "loopkv teacher-depth --cfg {params.cfg:q} --metrics {input:q} --pdf {output.pdf:q} --csv {output.csv:q}"
        " --tex {output.tex:q} > {log:q} 2>&1"
