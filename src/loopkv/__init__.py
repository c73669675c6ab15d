"""loopkv: KV-cache compression for looped language models (LLA, MELT), reproduced end to end.

`import loopkv` registers the Ouro architecture with transformers, so
`AutoModelForCausalLM.from_pretrained(ouro_dir)` works without trust_remote_code.
"""
from loopkv import models  # noqa: F401  (registration side effect)

__version__ = "0.1.0"
