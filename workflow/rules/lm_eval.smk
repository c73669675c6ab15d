# The evaluation suite through lm-eval (model "loopkv", tasks loopkv_<name> over local data):
# benchmark data from offline package files or from files you give (data.local_benchmarks,
# data.bigbench_sdist), one job
# per (method, budget, task, shard) with a fixed
# output path, a merge per task (equal to an unsharded run), LLA Table 7 and MELT Table 1.


rule bench_data:
    output:
        test=R("data/bench/{bench}/test.jsonl"),
        manifest=R("data/bench/{bench}/manifest.json"),
    wildcard_constraints:
        bench="|".join(b for b in BENCHMARK_NAMES if not BENCHMARKS[b].local),   # local_bench_data: the others
    params:
        out=parent("manifest"),
    resources:
        **job_resources("data-bench"),
    log:
        f"{LOGS}/data/bench_{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/data/bench_{{bench}}.tsv"
    shell:
        "loopkv data-bench {wildcards.bench:q} --out {params.out:q} > {log:q} 2>&1"


# a benchmark read from a file the config names: the same command and outputs as bench_data, the file its input
rule local_bench_data:
    input:
        source=local_bench_file,
    output:
        test=R("data/bench/{bench}/test.jsonl"),
        manifest=R("data/bench/{bench}/manifest.json"),
    wildcard_constraints:
        bench="|".join(b for b in BENCHMARK_NAMES if BENCHMARKS[b].local),
    params:
        out=parent("manifest"),
    resources:
        **job_resources("data-bench"),
    log:
        f"{LOGS}/data/bench_{{bench}}.log",
    benchmark:
        f"{LOGS}/benchmarks/data/bench_{{bench}}.tsv"
    shell:
        "loopkv data-bench {wildcards.bench:q} --source {input.source:q} --out {params.out:q} > {log:q} 2>&1"


# {served}: lm_eval serves each (method, budget) as built (a codec method: its off-policy codec);
# lm_eval_on_policy serves a codec method's on-policy codec (LLA Table 4 on a benchmark)
rule lm_eval_shard:
    input:
        unpack(lm_model_inputs),
        data=lambda w: f"{lm_task_data(w.task)}/test.jsonl",
    output:
        R("{served}/{method}/{budget}/{task}/shard{shard}of{shards}.json"),
    wildcard_constraints:
        served=SERVED_PATTERN,
        method="[a-z0-9_]+",
        budget="[^/]+",
        task="[a-z0-9_]+(-[a-z0-9]+)?",   # a task id: name, or name-variant
        shard=r"\d+",
        shards=r"\d+",
    params:
        cfg=job_cfg("lm-eval-shard"),
        teacher=parent("teacher"),
        data=parent("data"),
        model=lm_model_args,
        # lm-eval's request cache, one per served model (keyed inside by its files' hashes and method, budget, setting)
        cache=lambda w: R(f"{w.served}/request_cache"),
    threads: job_threads("lm-eval-shard")
    resources:
        **job_resources("lm-eval-shard"),
    log:
        f"{LOGS}/{{served}}/{{method}}_{{budget}}_{{task}}_{{shard}}of{{shards}}.log",
    benchmark:
        f"{LOGS}/benchmarks/{{served}}/{{method}}_{{budget}}_{{task}}_{{shard}}of{{shards}}.tsv"
    shell:
        "loopkv lm-eval-shard --cfg {params.cfg:q} --task loopkv_{wildcards.task:q}"
        " --data {params.data:q} --method {wildcards.method:q} --budget {wildcards.budget:q} --teacher {params.teacher:q}"
        " {params.model} --shard {wildcards.shard:q} --shards {wildcards.shards:q} --cache-dir {params.cache:q}"
        " --out {output:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule lm_eval_merge:
    input:
        lambda w: lm_shard_files(w.method, w.budget, w.task, w.served),
    output:
        R("{served}/{method}/{budget}/{task}.json"),
    wildcard_constraints:
        served=SERVED_PATTERN,
        method="[a-z0-9_]+",
        budget="[^/]+",
        task="[a-z0-9_]+(-[a-z0-9]+)?",   # a task id: name, or name-variant
    log:
        f"{LOGS}/{{served}}/{{method}}_{{budget}}_{{task}}_merge.log",
    benchmark:
        f"{LOGS}/benchmarks/{{served}}/{{method}}_{{budget}}_{{task}}_merge.tsv"
    shell:
        "loopkv lm-eval-merge {input:q} --out {output:q} > {log:q} 2>&1"


rule table7:
    input:
        [R(f"lm_eval/{m}/{b}/{t}.json") for m, b in LM_MODELS for t in LM_TASK_DATA],
    output:
        pdf=f"{REPORTS}/table7.pdf",
        csv=f"{REPORTS}/table7.csv",
        tex=f"{REPORTS}/table7.tex",
    log:
        f"{LOGS}/report/table7.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table7.tsv"
    shell:
        "loopkv table7 --results {input:q} --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


# MELT Table 1 from the same suite: the teacher and MELT on every configured task that is one of the
# table's benchmarks (melt_table1_results, common.smk; a benchmark no task runs is a "not run" row)
rule melt_table1:
    input:
        melt_table1_results,
    output:
        pdf=f"{REPORTS}/melt_table1.pdf",
        csv=f"{REPORTS}/melt_table1.csv",
        tex=f"{REPORTS}/melt_table1.tex",
    params:
        cfg=job_cfg("melt-table1"),
    localrule: True
    log:
        f"{LOGS}/report/melt_table1.log",
    benchmark:
        f"{LOGS}/benchmarks/report/melt_table1.tsv"
    shell:
        "loopkv melt-table1 --cfg {params.cfg:q} --results {input:q} --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q}"
        " > {log:q} 2>&1"


rule passkey_grid_data:
    input:
        corpus=R("data/corpus/manifest.json"),
        tokenizer=R("data/tokenizer/manifest.json"),
    output:
        test=R("data/passkey_grid/test.jsonl"),
        manifest=R("data/passkey_grid/manifest.json"),
    params:
        cfg=job_cfg("data-passkey-grid"),
        out=parent("manifest"),
        corpus=parent("corpus"),
        tokenizer=parent("tokenizer"),
    resources:
        **job_resources("data-passkey-grid"),
    log:
        f"{LOGS}/data/passkey_grid.log",
    benchmark:
        f"{LOGS}/benchmarks/data/passkey_grid.tsv"
    shell:
        "loopkv data-passkey-grid --cfg {params.cfg:q} --corpus {params.corpus:q}"
        " --tokenizer {params.tokenizer:q} --out {params.out:q} > {log:q} 2>&1"


rule fig8:
    input:
        data=R("data/passkey_grid/test.jsonl"),
        results=[R(f"lm_eval/{m}/{b}/passkey_grid.json") for m, b in GRID_MODELS],
    output:
        pdf=f"{REPORTS}/fig8_passkey.pdf",
        png=report(f"{REPORTS}/fig8_passkey.png", caption="../report/fig8_passkey.rst", category=REPORT_CATEGORIES["lla"],
                   labels={"result": "LLA Figure 8: passkey recall by length and depth"}),
        json=f"{REPORTS}/fig8_passkey.json",
        table_pdf=f"{REPORTS}/table12.pdf",
        table_csv=f"{REPORTS}/table12.csv",
        table_tex=f"{REPORTS}/table12.tex",
    params:
        cfg=job_cfg("fig8"),
    log:
        f"{LOGS}/report/fig8.log",
    benchmark:
        f"{LOGS}/benchmarks/report/fig8.tsv"
    shell:
        "loopkv fig8 --cfg {params.cfg:q} --data {input.data:q} --results {input.results:q}"
        " --pdf {output.pdf:q} --png {output.png:q} --json {output.json:q}"
        " --table-pdf {output.table_pdf:q} --table-csv {output.table_csv:q} --table-tex {output.table_tex:q} > {log:q} 2>&1"
