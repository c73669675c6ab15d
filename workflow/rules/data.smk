# Data for the embedded default: corpus splits, tokenizer, synthetic tasks. Each output directory
# is written atomically by its command (a killed job leaves no valid-looking output).


rule corpus:
    output:
        train=R("data/corpus/train.txt"),
        val=R("data/corpus/val.txt"),
        test=R("data/corpus/test.txt"),
        manifest=R("data/corpus/manifest.json"),
    params:
        cfg=job_cfg("data-corpus"),
        out=parent("manifest"),
    resources:
        **job_resources("data-corpus"),
    log:
        f"{LOGS}/data/corpus.log",
    benchmark:
        f"{LOGS}/benchmarks/data/corpus.tsv"
    shell:
        "loopkv data-corpus --cfg {params.cfg:q} --out {params.out:q} > {log:q} 2>&1"


rule tokenizer:
    input:
        train=R("data/corpus/train.txt"),
    output:
        R("data/tokenizer/tokenizer.json"),
        manifest=R("data/tokenizer/manifest.json"),
    params:
        cfg=job_cfg("data-tokenizer"),
        out=parent("manifest"),
    resources:
        **job_resources("data-tokenizer"),
    log:
        f"{LOGS}/data/tokenizer.log",
    benchmark:
        f"{LOGS}/benchmarks/data/tokenizer.tsv"
    shell:
        "loopkv data-tokenizer --cfg {params.cfg:q} --train {input.train:q} --out {params.out:q} > {log:q} 2>&1"


rule task_data:
    input:
        corpus=R("data/corpus/manifest.json"),
        tokenizer=R("data/tokenizer/manifest.json"),
    output:
        test=R("data/tasks/{task}/test.jsonl"),
        manifest=R("data/tasks/{task}/manifest.json"),
    wildcard_constraints:
        task="|".join(TASKS),
    params:
        cfg=job_cfg("data-task"),
        out=parent("manifest"),
        corpus=parent("corpus"),
        tokenizer=parent("tokenizer"),
    resources:
        **job_resources("data-task"),
    log:
        f"{LOGS}/data/task_{{task}}.log",
    benchmark:
        f"{LOGS}/benchmarks/data/task_{{task}}.tsv"
    shell:
        "loopkv data-task {wildcards.task:q} --cfg {params.cfg:q}"
        " --corpus {params.corpus:q} --tokenizer {params.tokenizer:q} --out {params.out:q} > {log:q} 2>&1"
