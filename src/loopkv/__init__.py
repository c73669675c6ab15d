"""loopkv: KV-cache compression for looped language models (LLA, MELT), reproduced end to end.

`import loopkv.models` registers the Ouro architecture with transformers, so
`AutoModelForCausalLM.from_pretrained(ouro_dir)` works without trust_remote_code. `import loopkv`
alone imports neither torch nor transformers: the model-free commands (merges, tables, figures,
verify) start in well under a second.
"""
__version__ = "0.1.0"
