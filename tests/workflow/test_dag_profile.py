"""`loopkv dag-profile`: the bounds and sums against hand computations, Snakemake's benchmark files
read (and refused when they are not), and a real Snakemake run of a small workflow whose timings we
know by construction (sleeps) profiled end to end."""
import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopkv.cli import main
from loopkv.errors import LoopKVError
from loopkv.jobs.dag_profile import JobRecord, Profile, Timing, read_benchmark, render, stage_of

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def job(rule, stage, threads, wall, cpu, rss, end, deps=()):
    return JobRecord(rule, "", stage, threads, f"logs/benchmarks/{stage}/{rule}.tsv", list(deps),
                     Timing(wall, cpu, rss, end))


def diamond():
    """a -> (b, c) -> d; b holds two threads."""
    return Profile([job("a", "data", 1, 10.0, 9.0, 100.0, 110.0),
                    job("b", "train", 2, 5.0, 9.5, 400.0, 116.0, [0]),
                    job("c", "train", 1, 20.0, 19.0, 300.0, 131.0, [0]),
                    job("d", "report", 1, 1.0, None, None, 133.0, [1, 2])], cores=2)


def test_bounds_and_stage_sums_match_a_hand_computation():
    profile = diamond()
    seconds, path = profile.critical_path()
    assert seconds == 10 + 20 + 1 and [profile.jobs[i].rule for i in path] == ["a", "c", "d"]
    assert profile.occupancy_bound() == (10 * 1 + 5 * 2 + 20 * 1 + 1 * 1) / 2
    assert profile.span() == 133.0 - 100.0   # a started at 110 - 10
    train = next(r for r in profile.by_stage() if r["stage"] == "train")
    assert (train["jobs"], train["wall_s"], train["cpu_s"], train["core_s"], train["max_rss_mib"]) == (2, 25, 28.5, 30, 400)
    assert train["span_s"] == 131.0 - 111.0   # b and c both started at 111 (ends less walls); c ended at 131
    assert [r["stage"] for r in profile.by_stage()] == ["train", "data", "report"]   # most core-seconds first
    # on one core a two-thread job holds one core
    assert Profile(profile.jobs, cores=1).occupancy_bound() == 10 + 5 + 20 + 1
    text = render(profile)
    assert "| critical path (any number of cores) | 31 |" in text and "the critical path (0.5 min)" in text


def test_a_job_not_run_counts_as_zero_and_is_named():
    profile = diamond()
    profile.jobs[2].timing = None
    seconds, path = profile.critical_path()
    assert seconds == 16 and [profile.jobs[i].rule for i in path] == ["a", "b", "d"]
    assert [j.rule for j in profile.not_run] == ["c"]
    assert "Without a benchmark file yet (not run, or failed; they count as zero below): c." in render(profile)


def test_stage_is_the_directory_under_benchmarks():
    assert stage_of("logs/benchmarks/melt/full_stage1.tsv", "melt_stage1") == "melt"
    assert stage_of("logs/ouro-1.4b/benchmarks/lm_eval/x.tsv", "lm_eval_shard") == "lm_eval"
    assert stage_of("logs/benchmarks/x.tsv", "rule") == "rule"
    assert stage_of(None, "all") == "all"


def test_a_benchmark_file_is_read_as_snakemake_writes_it(tmp_path):
    path = tmp_path / "b.tsv"
    path.write_text(HEADER + "5.07\t0:00:05\t496.16\t1242.45\t297.22\t357.21\t0.02\t0.09\t77.05\t4.37\n")
    os.utime(path, (1000.0, 1000.0))
    assert read_benchmark(path) == Timing(5.07, 4.37, 496.16, 1000.0)
    path.write_text(HEADER + "0.21\t0:00:00\t-\t-\t-\t-\t-\t-\t-\t-\n")   # too short for the sampler
    timing = read_benchmark(path)
    assert timing.wall_s == 0.21 and timing.cpu_s is None and timing.max_rss_mib is None


@pytest.mark.parametrize("text, says", [
    ("", "no benchmark row"),
    (HEADER, "no benchmark row"),
    ("s\tcpu_time\n1\t1\n", "no column max_rss"),
    (HEADER + "abc\t0\t1\t1\t1\t1\t1\t1\t1\t1\n", "column 's' holds 'abc'"),
    (HEADER + "nan\t0\t1\t1\t1\t1\t1\t1\t1\t1\n", "not a finite non-negative number"),
    (HEADER + "-\t0\t1\t1\t1\t1\t1\t1\t1\t1\n", "column 's' (wall seconds) is empty"),
    (HEADER + "1\t0\t-5\t1\t1\t1\t1\t1\t1\t1\n", "column 'max_rss' holds '-5'"),
], ids=["empty", "header-only", "not-snakemake", "text", "nan", "no-wall", "negative"])
def test_a_broken_benchmark_file_is_refused_naming_it(tmp_path, text, says):
    path = tmp_path / "broken.tsv"
    path.write_text(text)
    with pytest.raises(LoopKVError, match=f"broken.tsv.*{says}".replace("(", r"\(").replace(")", r"\)")):
        read_benchmark(path)


SNAKEFILE = textwrap.dedent("""
    rule all:
        input: "out/b", "out/c", "out/d"

    rule a:
        output: "out/a"
        benchmark: "logs/benchmarks/first/a.tsv"
        shell: "sleep 0.3; touch {output}"

    rule b:
        input: "out/a"
        output: "out/b"
        threads: 2
        benchmark: "logs/benchmarks/second/b.tsv"
        shell: "sleep 1.5; touch {output}"

    rule c:
        input: "out/a"
        output: "out/c"
        benchmark: "logs/benchmarks/second/c.tsv"
        shell: "touch {output}"

    rule d:
        input: "out/c"
        output: "out/d"
        benchmark: "logs/benchmarks/third/d.tsv"
        shell: "touch {output}"
""")


def test_a_real_run_is_profiled_from_its_benchmark_files(tmp_path, capsys):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "out/b", "out/c"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=300)   # d is left unrun
    assert main(["dag-profile", "--workdir", str(tmp_path), "--csv", str(tmp_path / "jobs.csv")]) == 0
    text = capsys.readouterr().out
    rows = {r["rule"]: r for r in csv.DictReader(open(tmp_path / "jobs.csv"))}
    assert set(rows) == {"all", "a", "b", "c", "d"}
    assert float(rows["a"]["wall_s"]) >= 0.3 and float(rows["b"]["wall_s"]) >= 1.5
    assert rows["d"]["wall_s"] == "" and "Without a benchmark file yet (not run, or failed; they count as zero below): d." in text
    assert (rows["b"]["threads"], rows["b"]["stage"], rows["d"]["stage"]) == ("2", "second", "third")
    assert [r for r in rows if rows[r]["critical_path"] == "True"] == ["a", "b", "all"]   # the sleeps' chain
    assert float(rows["b"]["start"]) >= float(rows["a"]["end"]) - 0.5   # b waited for a (benchmark clocks)
    walls = {r: float(rows[r]["wall_s"] or 0) for r in rows}
    bound = (walls["a"] + 2 * walls["b"] + walls["c"]) / 2
    assert f"| occupancy bound (2 cores) | {bound:.0f} |" in text


def test_a_target_no_rule_makes_is_refused(tmp_path, capsys):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    assert main(["dag-profile", "--workdir", str(tmp_path), "out/nothing"]) == 2
    assert "No rule to produce out/nothing" in capsys.readouterr().err
    assert main(["dag-profile", "--workdir", str(tmp_path / "none")]) == 2
    assert "no Snakefile" in capsys.readouterr().err


def test_the_dag_timer_runs_a_target_from_nothing_and_profiles_it(tmp_path):
    """benchmarks/dag_time.py on the workflow's first job: a scratch copy without results, timed, profiled."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(repo / "benchmarks/dag_time.py"), "--targets",
                           "results/data/corpus/manifest.json", "--scratch", str(tmp_path), "--keep"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = tmp_path / "run0"
    assert (run / "results/data/corpus/manifest.json").is_file() and (run / "Snakefile").is_file()
    rows = list(csv.DictReader(open(run / "dag_profile.csv")))
    assert [r["rule"] for r in rows] == ["corpus"] and float(rows[0]["wall_s"]) > 0
    assert "# DAG profile: 1 of 1 jobs timed" in proc.stdout
    assert "| results/data/corpus/manifest.json |" in proc.stdout.splitlines()[-1]
