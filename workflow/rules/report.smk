# Tables: measured results beside the papers' reported values.


rule table1:
    input:
        cells=[R(f"methods/{m}/{b}/quality.json") for m, b in table1_cells()],
        samples=[R(f"methods/{m}/{b}/quality_samples.json") for m, b in table1_cells()],
        curves=[R(f"distill/{m}/{b}/curve.json") for m, b in table1_cells() if m in CODEC_METHODS],
    output:
        pdf=f"{REPORTS}/table1.pdf",
        csv=f"{REPORTS}/table1.csv",
        tex=f"{REPORTS}/table1.tex",
    params:
        cfg=job_cfg("table1"),
    log:
        f"{LOGS}/report/table1.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table1.tsv"
    shell:
        "loopkv table1 --cfg {params.cfg:q} --cells {input.cells:q} --samples {input.samples:q} --curves {input.curves:q}"
        " --pdf {output.pdf:q}"
        " --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule agreement:
    input:
        pairs=[path for pair in agreement_pairs() for path in pair],
    output:
        f"{REPORTS}/agreement.json",
    log:
        f"{LOGS}/report/agreement.log",
    benchmark:
        f"{LOGS}/benchmarks/report/agreement.tsv"
    shell:
        "loopkv check-agreement --pairs {input.pairs:q} --out {output:q} > {log:q} 2>&1"


rule claims:
    input:
        reports=list(claim_reports().values()),
    output:
        csv=f"{REPORTS}/claims.csv",
        md=f"{REPORTS}/claims.md",
        pdf=f"{REPORTS}/claims.pdf",
    params:
        cfg=job_cfg("claims"),
        reports=flag_args(("--report", f"{name}={path}") for name, path in claim_reports().items()),
    log:
        f"{LOGS}/report/claims.log",
    benchmark:
        f"{LOGS}/benchmarks/report/claims.tsv"
    shell:
        "loopkv claims --cfg {params.cfg:q} {params.reports} --csv {output.csv:q} --md {output.md:q}"
        " --pdf {output.pdf:q} > {log:q} 2>&1"
