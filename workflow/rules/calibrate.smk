# Calibration: the teacher's K/V on calibration prompts, and the cross-loop structure (Figure 2).


rule calibrate:
    input:
        teacher=f"{teacher_dir()}/config.json",
        corpus=R("data/corpus/manifest.json"),
        tasks=expand(R("data/tasks/{task}/manifest.json"), task=CALIBRATION_TASKS),
    output:
        state=R("calibration/calibration.pt"),
        manifest=R("calibration/calibration.json"),
    params:
        cfg=job_cfg("calibrate"),
        teacher=parent("teacher"),
        corpus=parent("corpus"),
        tasks=task_args({t: R(f"data/tasks/{t}") for t in CALIBRATION_TASKS}),
    threads: job_threads("calibrate")
    resources:
        **job_resources("calibrate"),
    log:
        f"{LOGS}/calibration/calibrate.log",
    benchmark:
        f"{LOGS}/benchmarks/calibration/calibrate.tsv"
    shell:
        "loopkv calibrate --cfg {params.cfg:q} --teacher {params.teacher:q}"
        " --corpus {params.corpus:q} {params.tasks} --out {output.state:q} --manifest {output.manifest:q} --threads {threads:q} --device {resources.device:q} > {log:q} 2>&1"


rule cross_loop_structure:
    input:
        R("calibration/calibration.pt"),
    output:
        R("analysis/cross_loop_structure.json"),
    log:
        f"{LOGS}/analysis/cross_loop_structure.log",
    benchmark:
        f"{LOGS}/benchmarks/analysis/cross_loop_structure.tsv"
    shell:
        "loopkv cross-loop-structure --calibration {input:q} --out {output:q} > {log:q} 2>&1"


rule fig2_spectra:
    input:
        R("analysis/cross_loop_structure.json"),
    output:
        pdf=f"{REPORTS}/{CROSS_LOOP_FIGURE}.pdf",
        png=report(f"{REPORTS}/{CROSS_LOOP_FIGURE}.png", caption="../report/fig2_spectra.rst", category=REPORT_CATEGORIES["lla"],
                   labels={"result": f"LLA Figure {4 if huginn() else 2}: cross-loop structure of the teacher's K/V"}),
    params:
        cfg=job_cfg("plot-cross-loop"),
    log:
        f"{LOGS}/report/{CROSS_LOOP_FIGURE}.log",
    benchmark:
        f"{LOGS}/benchmarks/report/{CROSS_LOOP_FIGURE}.tsv"
    shell:
        "loopkv plot-cross-loop --cfg {params.cfg:q} --structure {input:q} --figure {output.pdf:q} > {log:q} 2>&1"


rule fig3_trajectories:
    input:
        R("analysis/cross_loop_structure.json"),
    output:
        pdf=f"{REPORTS}/fig3_trajectories.pdf",
        png=report(f"{REPORTS}/fig3_trajectories.png", caption="../report/fig3_trajectories.rst",
                   category=REPORT_CATEGORIES["lla"], labels={"result": "LLA Figure 3: cross-loop trajectories"}),
    params:
        cfg=job_cfg("plot-trajectories"),
    log:
        f"{LOGS}/report/fig3_trajectories.log",
    benchmark:
        f"{LOGS}/benchmarks/report/fig3_trajectories.tsv"
    shell:
        "loopkv plot-trajectories --cfg {params.cfg:q} --structure {input:q} --pdf {output.pdf:q} --png {output.png:q}"
        " > {log:q} 2>&1"
