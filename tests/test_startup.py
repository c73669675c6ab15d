"""A model-free command (a merge, a table, the claims, verify) starts without torch or transformers:
the DAG runs a hundred such jobs, and importing those two cost ~5 s each (measured: an lm-eval merge
took 6-7 s, now 0.3 s)."""
import subprocess
import sys

PROBE = """
import sys
from loopkv.cli import build_parser
build_parser()                      # every command's parser, as each job's start-up builds it
import loopkv.report.tables, loopkv.report.table7, loopkv.report.melt_table1, loopkv.report.fig_passkey, loopkv.claims.registry
import loopkv.report.html_table   # the HTML report's pages: a job each, in well under a second
import loopkv.claims.claim, loopkv.claims.render, loopkv.verify
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(",".join(heavy))
"""


def test_building_the_cli_and_the_report_code_imports_no_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at start-up: {out}"


def test_the_model_classes_still_register_with_transformers():
    probe = ("import transformers, json, tempfile\n"
             "from loopkv.models import OuroConfig\n"
             "d = tempfile.mkdtemp(); OuroConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,"
             " intermediate_size=64, vocab_size=64).save_pretrained(d)\n"
             "print(type(transformers.AutoConfig.from_pretrained(d)).__name__)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out.splitlines()[-1] == "OuroConfig"
