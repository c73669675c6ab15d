# On-policy codec distillation (LLA Eq. 6-7) after the off-policy one, evaluated like a Table 1 cell;
# LLA Table 4 (off- vs on-policy per budget) and Figure 7 (exposure curves).


rule distill_on_policy:
    input:
        teacher=f"{teacher_dir()}/config.json",
        init=R("distill/{method}/{budget}/codec.pt"),
        corpus=R("data/corpus/manifest.json"),
        prompts=list(on_policy_prompt_files().values()),
    output:
        codec=R("on_policy/{method}/{budget}/codec.pt"),
        curve=R("on_policy/{method}/{budget}/curve.json"),
    wildcard_constraints:
        method="|".join(CODEC_METHODS),
    params:
        cfg=job_cfg("distill-on-policy"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        prompts=flag_args(("--prompts", f"{t}={os.path.dirname(made)}") for t, made in on_policy_prompt_files().items()),
        checkpoints=lambda w: R(f"on_policy/{w.method}/{w.budget}/checkpoints"),
    threads: job_threads("distill-on-policy")
    resources:
        **job_resources("distill-on-policy"),
    log:
        f"{LOGS}/on_policy/{{method}}_{{budget}}.log",
    benchmark:
        f"{LOGS}/benchmarks/on_policy/{{method}}_{{budget}}.tsv"
    shell:
        "loopkv distill-on-policy --cfg {params.cfg:q} --method {wildcards.method:q}"
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
        cfg=job_cfg("method-eval"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in TASKS}),
    threads: job_threads("method-eval")
    resources:
        **job_resources("method-eval"),
    log:
        f"{LOGS}/on_policy/{{method}}_{{budget}}_eval.log",
    benchmark:
        f"{LOGS}/benchmarks/on_policy/{{method}}_{{budget}}_eval.tsv"
    shell:
        "loopkv method-eval --cfg {params.cfg:q} --method {wildcards.method:q}"
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
        **table4_benchmark_results(),
    output:
        table_pdf=f"{REPORTS}/table4.pdf",
        table_csv=f"{REPORTS}/table4.csv",
        table_tex=f"{REPORTS}/table4.tex",
        fig_pdf=f"{REPORTS}/fig7_exposure.pdf",
        fig_png=report(f"{REPORTS}/fig7_exposure.png", caption="../report/fig7_exposure.rst",
                       category=REPORT_CATEGORIES["lla"], labels={"result": "LLA Figure 7: exposure curves"}),
        fig_json=f"{REPORTS}/fig7_exposure.json",
        pareto_pdf=f"{REPORTS}/fig11_pareto.pdf",
        pareto_png=report(f"{REPORTS}/fig11_pareto.png", caption="../report/fig11_pareto.rst",
                          category=REPORT_CATEGORIES["lla"], labels={"result": "LLA Figure 11: on-policy rank Pareto"}),
        pareto_json=f"{REPORTS}/fig11_pareto.json",
    params:
        cfg=job_cfg("table4-fig7"),
        # on a benchmark: its lm-eval results (teacher, off-, on-policy) and the tokenizer counting their tokens
        bench=lambda w, input: " ".join(
            [flag_args([("--bench-teacher", input.bench_teacher), ("--tokenizer", os.path.dirname(input.tokenizer))]),
             "--bench-off", *map(shlex.quote, input.bench_off), "--bench-on", *map(shlex.quote, input.bench_on)]
        ) if ON_POLICY_BENCHMARK else "",
    log:
        f"{LOGS}/report/table4_fig7.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table4_fig7.tsv"
    shell:
        "loopkv table4-fig7 --cfg {params.cfg:q} --teacher-samples {input.teacher:q} --off {input.off:q} --on {input.on:q}"
        " --off-curves {input.off_curves:q} --on-curves {input.on_curves:q} {params.bench}"
        " --table-pdf {output.table_pdf:q} --table-csv {output.table_csv:q} --table-tex {output.table_tex:q}"
        " --fig-pdf {output.fig_pdf:q} --fig-png {output.fig_png:q} --fig-json {output.fig_json:q}"
        " --pareto-pdf {output.pareto_pdf:q} --pareto-png {output.pareto_png:q} --pareto-json {output.pareto_json:q}"
        " > {log:q} 2>&1"
