"""Data for the embedded default: the text corpus and its splits, the tokenizer, and the synthetic tasks."""
