# Tables: measured results beside the papers' reported values.


rule table1:
    input:
        cells=[R(f"methods/{m}/{b}/quality.json") for m, b in table1_cells()],
        samples=[R(f"methods/{m}/{b}/quality_samples.json") for m, b in table1_cells()],
        curves=[R(f"distill/{m}/{b}/curve.json") for m, b in table1_cells() if m in CODEC_METHODS],
        benchmarks=table1_benchmark_results(),
    output:
        pdf=f"{REPORTS}/{LLA_TABLE}.pdf",
        csv=f"{REPORTS}/{LLA_TABLE}.csv",
        tex=f"{REPORTS}/{LLA_TABLE}.tex",
    params:
        cfg=job_cfg("table1"),
    log:
        f"{LOGS}/report/table1.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table1.tsv"
    shell:
        "loopkv table1 --cfg {params.cfg:q} --cells {input.cells:q} --samples {input.samples:q} --curves {input.curves:q}"
        " --benchmarks {input.benchmarks:q} --pdf {output.pdf:q}"
        " --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule table8:
    input:
        cells=[R(f"methods/{m}/{b}/quality.json") for m, b in table8_cells()],
        samples=[R(f"methods/{m}/{b}/quality_samples.json") for m, b in table8_cells()],
        curves=[R(f"distill/{m}/{b}/curve.json") for m, b in table8_cells() if m in CODEC_METHODS],
        benchmarks=table8_benchmark_results(),
    output:
        pdf=f"{REPORTS}/table8.pdf",
        csv=f"{REPORTS}/table8.csv",
        tex=f"{REPORTS}/table8.tex",
        fig_pdf=f"{REPORTS}/fig5_rank_sweep.pdf",
        fig_png=report(f"{REPORTS}/fig5_rank_sweep.png", caption="../report/fig5_rank_sweep.rst",
                       category=REPORT_CATEGORIES["lla"], labels={"result": "LLA Figure 5: the cold-start rank sweep"}),
    params:
        cfg=job_cfg("table8"),
    log:
        f"{LOGS}/report/table8.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table8.tsv"
    shell:
        "loopkv table8 --cfg {params.cfg:q} --cells {input.cells:q} --samples {input.samples:q} --curves {input.curves:q}"
        " --benchmarks {input.benchmarks:q} --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --fig-pdf {output.fig_pdf:q} --fig-png {output.fig_png:q} > {log:q} 2>&1"


rule table9:
    input:
        evicted=[R(f"eviction/{m}/{b}/quality.json") for m, b in EVICTION_CELLS],
        evicted_samples=[R(f"eviction/{m}/{b}/quality_samples.json") for m, b in EVICTION_CELLS],
        plain=[R(f"methods/{m}/{b}/quality.json") for m, b in EVICTION_CELLS],
        plain_samples=[R(f"methods/{m}/{b}/quality_samples.json") for m, b in EVICTION_CELLS],
    output:
        pdf=f"{REPORTS}/table9.pdf",
        csv=f"{REPORTS}/table9.csv",
        tex=f"{REPORTS}/table9.tex",
    params:
        cfg=job_cfg("table9"),
    log:
        f"{LOGS}/report/table9.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table9.tsv"
    shell:
        "loopkv table9 --cfg {params.cfg:q} --evicted {input.evicted:q} --plain {input.plain:q}"
        " --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


rule table10:
    input:
        curves=table10_curves(),
    output:
        pdf=f"{REPORTS}/table10.pdf",
        csv=f"{REPORTS}/table10.csv",
        tex=f"{REPORTS}/table10.tex",
        fig_pdf=f"{REPORTS}/fig12_ablation_curves.pdf",
        fig_png=report(f"{REPORTS}/fig12_ablation_curves.png", caption="../report/fig12_ablation_curves.rst",
                       category=REPORT_CATEGORIES["lla"], labels={"result": "LLA Figure 12: held-out KL of each ablation"}),
    params:
        cfg=job_cfg("table10"),
        curves=flag_args(("--curve", f"{v}={path}") for v, path in zip(DISTILL_ABLATIONS, table10_curves())),
    log:
        f"{LOGS}/report/table10.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table10.tsv"
    shell:
        "loopkv table10 --cfg {params.cfg:q} {params.curves}"
        " --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q}"
        " --fig-pdf {output.fig_pdf:q} --fig-png {output.fig_png:q} > {log:q} 2>&1"


rule table14:
    input:
        curves=table14_curves(),
    output:
        pdf=f"{REPORTS}/table14.pdf",
        csv=f"{REPORTS}/table14.csv",
        tex=f"{REPORTS}/table14.tex",
    params:
        curves=flag_args(("--curve", f"{v}={path}") for v, path in zip(DISTILL_ABLATIONS[:1] + DECOUPLED_VARIANTS,
                                                                       table14_curves())),
    log:
        f"{LOGS}/report/table14.log",
    benchmark:
        f"{LOGS}/benchmarks/report/table14.tsv"
    shell:
        "loopkv table14 {params.curves}"
        " --pdf {output.pdf:q} --csv {output.csv:q} --tex {output.tex:q} > {log:q} 2>&1"


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


# The pages of the HTML report (`snakemake --report`, README): the claims page, and each table's
# page from its CSV and .tex. A rule per table, from one definition, so that each page has its own
# caption (workflow/report/<name>.rst); the figures are their rules' PNGs.
rule claims_html:
    input:
        csv=f"{REPORTS}/claims.csv",
        md=f"{REPORTS}/claims.md",
    output:
        report(f"{REPORTS}/claims.html", caption="../report/claims.rst", category=REPORT_CATEGORIES["claims"],
               labels={"result": "The papers' claims against this run"}),
    log:
        f"{LOGS}/report/claims_html.log",
    benchmark:
        f"{LOGS}/benchmarks/report/claims_html.tsv"
    shell:
        "loopkv claims-html --csv {input.csv:q} --md {input.md:q} --html {output:q} > {log:q} 2>&1"


for _name, (_category, _title) in report_tables().items():

    rule:
        name:
            f"{_name}_html"
        localrule: True
        input:
            csv=f"{REPORTS}/{_name}.csv",
            tex=f"{REPORTS}/{_name}.tex",
        output:
            report(f"{REPORTS}/{_name}.html", caption=f"../report/{_name}.rst", category=_category,
                   labels={"result": _title}),
        params:
            title=_title,
        log:
            f"{LOGS}/report/{_name}_html.log",
        benchmark:
            f"{LOGS}/benchmarks/report/{_name}_html.tsv"
        shell:
            "loopkv table-html --csv {input.csv:q} --tex {input.tex:q} --title {params.title:q} --html {output:q}"
            " > {log:q} 2>&1"
