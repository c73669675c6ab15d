# Serving benchmarks (LLA Table 5) and the latent-attention kernel benchmark (Table 13). Random-weight
# models of the configured architecture: they depend on the config alone, never on trained weights.


rule serve_bench:
    output:
        R("serve/serving.json"),
    params:
        cfg=job_cfg("serve-bench"),
    threads: job_threads("serve-bench")
    resources:
        **job_resources("serve-bench"),
    log:
        f"{LOGS}/serve/serving.log",
    benchmark:
        f"{LOGS}/benchmarks/serve/serving.tsv"
    shell:
        "loopkv serve-bench --cfg {params.cfg:q} --out {output:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule kernel_bench:
    output:
        R("serve/kernel.json"),
    params:
        cfg=job_cfg("kernel-bench"),
    threads: job_threads("kernel-bench")
    resources:
        **job_resources("kernel-bench"),
    log:
        f"{LOGS}/serve/kernel.log",
    benchmark:
        f"{LOGS}/benchmarks/serve/kernel.tsv"
    shell:
        "loopkv kernel-bench --cfg {params.cfg:q} --out {output:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule table5:
    input:
        R("serve/serving.json"),
    output:
        pdf=f"{REPORTS}/table5.pdf",
        csv=f"{REPORTS}/table5.csv",
        tex=f"{REPORTS}/table5.tex",
    log:
        f"{LOGS}/report/table5.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table5.tsv"
    shell:
        "loopkv table5 --result {input:q} --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule table13:
    input:
        R("serve/kernel.json"),
        config["serve"]["kernel"]["measured"],   # results measured on other devices (e.g. a GPU)
    output:
        pdf=f"{REPORTS}/table13.pdf",
        csv=f"{REPORTS}/table13.csv",
        tex=f"{REPORTS}/table13.tex",
    log:
        f"{LOGS}/report/table13.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table13.tsv"
    shell:
        "loopkv table13 --result {input:q} --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule fig10_capacity:
    input:
        R("serve/serving.json"),
    output:
        pdf=f"{REPORTS}/fig10_capacity.pdf",
        png=report(f"{REPORTS}/fig10_capacity.png", caption="../report/fig10_capacity.rst",
                   category=REPORT_CATEGORIES["serving"], labels={"result": "LLA Figure 10: capacity against context length"}),
    params:
        cfg=job_cfg("fig-capacity"),
    log:
        f"{LOGS}/report/fig10_capacity.log",
    benchmark:
        f"{LOGS}/benchmarks/report/fig10_capacity.tsv"
    shell:
        "loopkv fig-capacity --cfg {params.cfg:q} --result {input:q} --pdf {output.pdf:q} --png {output.png:q} > {log:q} 2>&1"
