"""loopkv: KV-cache compression for looped language models (LLA, MELT), reproduced end to end.

`import loopkv` registers the Ouro architecture with transformers, so
`AutoModelForCausalLM.from_pretrained(ouro_dir)` works without trust_remote_code.
"""
import os

# Intel MKL (torch's CPU BLAS) is not run-to-run reproducible by default: fresh processes computing
# the same training step from the same state disagreed at float round-off in 2-5% of runs (measured,
# issue 6), so a resumed run could not equal an uninterrupted one bit for bit. Its conditional
# numerical reproducibility mode removes that (0 in 87 runs); it must be set before MKL initialises,
# i.e. before torch is imported, hence here. A value the user set is kept.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from loopkv import models  # noqa: E402,F401  (registration side effect)

__version__ = "0.1.0"
