"""The sandbox for generated code: canonical HumanEval solutions pass, wrong ones fail, and hostile
programs are contained (scored as failures, and the host is untouched)."""
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from box_processes import no_own_box_processes_left, own_orphans  # noqa: F401 (a fixture)

from loopkv.eval.code_exec import (humaneval_problems, humaneval_program, mbpp_problems, mbpp_program, pass_at_k,
                                  run_all)
from loopkv.eval.sandbox import Limits, available, run_program

OK, WHY = available()
pytestmark = [pytest.mark.skipif(not OK, reason=f"sandbox unavailable on this machine: {WHY}"),
              pytest.mark.usefixtures("own_orphans")]
QUICK = Limits(timeout_s=5, cpu_s=2, memory_mb=256, output_kb=64)


@pytest.fixture
def project(tmp_path):
    """A stand-in for the project: a secret file and a results/ directory the program must not touch."""
    (tmp_path / "secret.txt").write_text("model weights live here")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table.csv").write_text("a,b\n1,2\n")
    return tmp_path


def test_a_correct_program_passes_and_a_wrong_one_fails():
    assert run_program("assert sum([1, 2]) == 3\nprint('ok')", QUICK).passed
    failed = run_program("assert sum([1, 2]) == 4", QUICK)
    assert failed.status == "failed" and "AssertionError" in failed.stderr


def test_humaneval_canonical_solutions_pass_and_empty_ones_fail(project):
    problems = humaneval_problems()
    assert len(problems) == 164
    good = run_all([humaneval_program(p, p["canonical_solution"]) for p in problems], hidden=[project])
    bad = run_all([humaneval_program(p, "    return None\n") for p in problems], hidden=[project])
    assert pass_at_k(1, 1, 1) == 1.0
    assert sum(o.passed for o in good) / len(problems) == 1.0
    assert sum(o.passed for o in bad) == 0


def test_mbpp_canonical_solutions_pass_and_another_problems_fail(project):
    problems = mbpp_problems()
    assert len(problems) == 500 and len({p["task_id"] for p in problems}) == 500
    good = run_all([mbpp_program(p, p["code"]) for p in problems], hidden=[project])
    assert [p["task_id"] for p, o in zip(problems, good) if not o.passed] == []
    # the next problem's solution: wrong function (or wrong behaviour) for every problem sampled
    wrong = run_all([mbpp_program(p, problems[i + 1]["code"]) for i, p in enumerate(problems[:100])], hidden=[project])
    assert sum(o.passed for o in wrong) == 0


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)      # 1 - C(3,2)/C(5,2)
    assert pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_infinite_loop_is_stopped():
    start = time.monotonic()
    outcome = run_program("while True:\n    pass", QUICK)
    assert not outcome.passed and time.monotonic() - start < QUICK.timeout_s + 2
    assert no_own_box_processes_left()


def test_sleeping_past_the_wall_clock_times_out():
    outcome = run_program("import time\ntime.sleep(60)", Limits(timeout_s=1))
    assert outcome.status == "timeout" and outcome.seconds < 3
    assert no_own_box_processes_left()


def test_fork_bomb_is_contained():
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    start = time.monotonic()
    outcome = run_program(bomb, QUICK)
    assert not outcome.passed and time.monotonic() - start < QUICK.timeout_s + 3
    assert no_own_box_processes_left()


def test_memory_hog_fails():
    outcome = run_program("x = bytearray(2 * 1024 ** 3)\nprint(len(x))", QUICK)
    assert outcome.status == "failed" and "MemoryError" in outcome.stderr


def test_output_flood_is_cut():
    outcome = run_program("while True:\n    print('x' * 1000)", QUICK)
    assert not outcome.passed and len(outcome.stdout) <= QUICK.output_kb * 1024


def test_project_files_cannot_be_read(project):
    program = f"print(open({str(project / 'secret.txt')!r}).read())"
    outcome = run_program(program, QUICK, hidden=[project])
    assert outcome.status == "failed" and "model weights" not in outcome.stdout


def test_files_outside_the_box_cannot_be_deleted_or_written(project):
    program = (f"import os, shutil\n"
               f"shutil.rmtree({str(project / 'results')!r}, ignore_errors=True)\n"
               f"open({str(project / 'results' / 'injected.csv')!r}, 'w').write('x')\n"
               f"for p in ('/etc/hostname', '/usr/bin/env'):\n"
               f"    try:\n        os.remove(p)\n    except OSError:\n        pass\n"
               f"assert not os.path.exists('/etc/hostname')\n")
    outcome = run_program(program, QUICK, hidden=[project])
    assert not outcome.passed
    assert (project / "results" / "table.csv").read_text() == "a,b\n1,2\n"
    assert not (project / "results" / "injected.csv").exists()
    assert Path("/etc/hostname").exists() and Path("/usr/bin/env").exists()


def test_network_is_unreachable_even_on_the_hosts_loopback():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    program = (f"import socket\n"
               f"socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n")
    outcome = run_program(program, QUICK)
    outside = run_program("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)", QUICK)
    server.close()
    assert outcome.status == "failed" and outside.status == "failed" and not accepted


def test_the_box_starts_empty_and_runs_unprivileged():
    outcome = run_program("import os\nprint(os.getuid(), os.getcwd(), os.listdir('.'), sorted(os.listdir('/')))", QUICK)
    assert outcome.passed
    assert outcome.stdout.split("\n")[0] == "65534 /tmp [] ['dev', 'lib', 'lib64', 'tmp', 'usr']"


def test_a_program_that_exits_0_before_its_tests_scores_0():
    """The verdict is the judge's token after the program returned, never the exit status: a
    completion that exits with status 0 when called, or at import before check() runs, scores 0."""
    problems = humaneval_problems()[:12]
    completions = ("    import sys; sys.exit(0)\n", "    import os; os._exit(0)\n",
                   "    return None\nimport sys\nsys.exit(0)\n", "    return None\nimport os\nos._exit(0)\n",
                   "    return None\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    for completion in completions:
        outcomes = run_all([humaneval_program(p, completion) for p in problems])
        assert sum(o.passed for o in outcomes) == 0, completion


@pytest.mark.skipif(os.geteuid() != 0, reason="this machine's tests run as a normal user already")
def test_the_sandbox_works_for_a_normal_user(tmp_path_factory):
    """The same harness run by an unprivileged user (no root to hand over from): the package's
    sandbox files copied where that user can read them, run by the system interpreter."""
    import loopkv.errors
    import loopkv.eval.sandbox as sandbox

    root = Path(tempfile.mkdtemp(prefix="loopkv-user-sandbox-"))
    try:
        (root / "loopkv" / "eval").mkdir(parents=True)
        (root / "loopkv" / "__init__.py").write_text("")
        (root / "loopkv" / "eval" / "__init__.py").write_text("")
        shutil.copy(loopkv.errors.__file__, root / "loopkv" / "errors.py")
        for name in ("sandbox.py", "sandbox_launcher.py"):
            shutil.copy(Path(sandbox.__file__).with_name(name), root / "loopkv" / "eval" / name)
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755)
        script = ("from loopkv.eval.sandbox import run_program, available, Limits\n"
                  "ok, why = available()\nassert ok, why\n"
                  "good = run_program('import os\\nprint(os.getuid())', Limits(timeout_s=5))\n"
                  "bad = run_program('import sys\\nsys.exit(0)', Limits(timeout_s=5))\n"
                  "print(good.passed, good.stdout.strip(), bad.passed)\n")
        run = subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "/usr/bin/python3", "-I",
                              "-c", f"import sys; sys.path.insert(0, {str(root)!r})\n" + script],
                             capture_output=True, text=True, cwd="/", timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["True", "65534", "False"]
    finally:
        shutil.rmtree(root)
