"""Numbers the papers report (LLA: arXiv 2607.15456v2, Ouro-1.4B unless stated). They are shown
only beside our measured values, labelled "paper", never in their place."""

# LLA Figure 2 (Ouro-1.4B): cross-loop structure of the teacher cache.
FIG2_CROSS_LOOP = {
    "source": "LLA paper, Figure 2 / Section 4 (Ouro-1.4B, T=4)",
    "loop_normalized_effective_rank": (0.61, 0.63),
    "loop_first_direction_energy": 0.60,
    "head_and_layer_axes": "near full rank",
    "loop_variance_share": {"k": 0.06, "v": 0.17},
}

# LLA Table 1 (Ouro-1.4B; the 4x block in full, GSM8K only at 5.33x and 21.33x). Keyed by
# (method, ratio rounded to 2 decimals). "kl" is the paper's held-out teacher-forced KL ("train-KL",
# two-pass re-forward); GSM8K is 5-shot strict exact match, teacher on 1319 items and every codec
# and baseline row on 100; MC-avg / MMLU are 0-shot log-likelihood accuracies on the full sets.
TABLE1_SOURCE = "LLA paper, Table 1 (Ouro-1.4B, bf16 cache)"
TABLE1_N = {"gsm8k": {"teacher": 1319, "methods": 100}}
TABLE1 = {
    ("full", 1.0): {"gsm8k": 0.794, "mc_avg": 0.646, "mmlu": 0.682},
    ("final_loop", 4.0): {"gsm8k": 0.000, "mc_avg": 0.443, "mmlu": 0.537},
    ("lla", 4.0): {"kl": 0.059, "gsm8k": 0.800, "mc_avg": 0.640, "mmlu": 0.672},
    ("mla_head", 4.0): {"kl": 0.122, "gsm8k": 0.522, "mc_avg": 0.585, "mmlu": 0.657},
    ("cla", 4.0): {"kl": 0.267, "gsm8k": 0.660, "mc_avg": 0.597, "mmlu": 0.666},
    ("kv_quant", 4.0): {"gsm8k": 0.702, "mc_avg": 0.645, "mmlu": 0.672},
    ("lla", 5.33): {"gsm8k": 0.752},
    ("mla_head", 5.33): {"gsm8k": 0.180},
    ("kv_quant", 5.33): {"gsm8k": 0.122},
    ("lla2d", 5.33): {"gsm8k": 0.760},
    ("lla", 21.33): {"kl": 0.128, "gsm8k": 0.740},   # the KLs at 21.33x: Table 1's text, not its grid
    ("mla_head", 21.33): {"gsm8k": 0.680},
    ("lla2d", 21.33): {"kl": 0.097, "gsm8k": 0.723},
}
# Table 1's text: final-loop reuse's relative reconstruction error of K and V (the reason its GSM8K is 0).
FINAL_LOOP_RECONSTRUCTION_ERROR = {"k": 0.35, "v": 0.60}

# LLA Tables 2 (GSM8K, 2-shot) and 11 (MC mean) on Ouro-2.6B, keyed like TABLE1. The paper gives the
# teacher's GSM8K only as "about .83" (kept out of the grid); its layer-sharing (CLA) rows are at 4x / 6x /
# 12x, not at LLA's 5.33x / 10.67x.
OURO_2_6B_SOURCE = "LLA paper, Tables 2 (GSM8K, 2-shot) and 11 (MC mean), Ouro-2.6B"
OURO_2_6B_TEACHER_GSM8K = "about .83"
OURO_2_6B = {
    ("full", 1.0): {"mc_avg": 0.653},
    ("lla", 4.0): {"gsm8k": 0.834, "mc_avg": 0.645},
    ("lla", 5.33): {"gsm8k": 0.817, "mc_avg": 0.646},
    ("lla", 10.67): {"gsm8k": 0.821, "mc_avg": 0.640},
    ("mla_head", 4.0): {"gsm8k": 0.585, "mc_avg": 0.599},
    ("mla_head", 5.33): {"gsm8k": 0.772, "mc_avg": 0.606},
    ("mla_head", 10.67): {"gsm8k": 0.775, "mc_avg": 0.601},
    ("cla", 4.0): {"mc_avg": 0.602},
    ("cla", 6.0): {"mc_avg": 0.596},
    ("cla", 12.0): {"mc_avg": 0.575},
}
# LLA Table 3 on Huginn-3.5B at 32 recurrence steps, keyed like TABLE1: the SVD-initialised codec's
# two-pass KL and top-1 ("kl_svd", "top1_svd"), the distilled KL and the best top-1 ("kl", "top1"), MC-avg.
# At 16x and 32x the paper distils nothing ("-"): its best top-1 is the SVD codec's. Ranks r_k / r_v at
# d_head 96: 128/256, 64/128, 32/64, 16/32.
HUGINN_SOURCE = "LLA paper, Table 3 (Huginn-3.5B, 32 recurrence steps)"
HUGINN_TABLE3 = {
    ("full", 1.0): {"mc_avg": 0.523},
    ("lla", 16.0): {"kl_svd": 0.005, "top1_svd": 0.970, "top1": 0.970, "mc_avg": 0.523},
    ("lla", 32.0): {"kl_svd": 0.010, "top1_svd": 0.954, "top1": 0.954, "mc_avg": 0.525},
    ("lla", 64.0): {"kl_svd": 0.197, "top1_svd": 0.799, "kl": 0.145, "top1": 0.834, "mc_avg": 0.486},
    ("lla", 128.0): {"kl_svd": 0.763, "top1_svd": 0.620, "kl": 0.177, "top1": 0.812, "mc_avg": 0.473},
}
# LLA Section 5 (text): on Huginn, the head axis's SVD reconstruction error at equal budget is 20-30x the
# per-head loop axis's (Table 3 lists no per-rank values)
HUGINN_HEAD_AXIS_ERROR = (20, 30)
# report.paper_model -> the paper grid Table 1's paper columns come from, and its source line
TABLE1_BY_MODEL = {"Ouro-1.4B": (TABLE1, TABLE1_SOURCE), "Ouro-2.6B": (OURO_2_6B, OURO_2_6B_SOURCE),
                   "Huginn-3.5B": (HUGINN_TABLE3, HUGINN_SOURCE)}

# MELT (Ouro-1.4B-Thinking post-trained into MELT-1.6B). Gate ablation, paper Table 3: AIME24
# pass@1 of each state update (keyed by gate; "full" is the element-wise gate). Component ablation,
# paper Table 4: it reports one number only, "without chunk-wise training: 0.0%" accuracy, on a
# benchmark it does not name (not AIME24); its full recipe has no number of its own (44.8 is Table 3's).
MELT_SOURCE = "MELT paper, Table 3 (AIME24 pass@1, %)"
MELT_TABLE3 = {"full": 44.8, "single": 34.4, "last": 33.7, "ema": 30.2, "mean": 29.0}
MELT_TABLE4_SOURCE = "MELT paper, Table 4 (accuracy, %, benchmark not named)"
MELT_TABLE4 = {"no_chunk": 0.0}
# Memory at 32k generated tokens (GB, whole process on GPU): MELT vs Ouro-1.4B-Thinking vs Qwen3-1.7B;
# the KV cache itself is 4x smaller (one row per layer instead of T = 4).
MELT_MEMORY = {"source": "MELT paper, Section 5 (32k generated tokens)", "tokens": 32768,
               "total_gb": {"melt": 9.49, "ouro": 27.97, "qwen3_1.7b": 7.07}, "kv_ratio": 4.0,
               "ouro_kv_gb": 25.17, "ouro_weights_gb": 2.87}
# MELT Table 1 (pass@1 / accuracy, %; decoding at temperature 1.0, top-p 0.7, up to 32k tokens): MELT
# beside its teacher and other small models, by benchmark (keys are our task names) and model (keys of
# MELT_TABLE1_MODELS). A model the paper does not report on a benchmark has no entry there.
MELT_TABLE1_SOURCE = "MELT paper, Table 1 (pass@1 / accuracy, %; temperature 1.0, top-p 0.7, up to 32k tokens)"
# its decoding, the source's words above as values: report/melt_table1.py prefers the run that matches
MELT_TABLE1_DECODING = {"temperature": 1.0, "top_p": 0.7, "max_tokens": "32k"}
MELT_TABLE1_MODELS = {"melt": "MELT-1.6B", "ouro": "Ouro-1.4B-Thinking", "qwen3_1.7b": "Qwen3-1.7B",
                      "gemma4_e2b": "Gemma4-E2B", "deepseek_r1_1.5b": "DeepSeek-R1-1.5B", "qwen3.5_2b": "Qwen3.5-2B"}
MELT_TABLE1 = {
    "aime24": {"melt": 46.7, "ouro": 50.2, "qwen3_1.7b": 43.1, "gemma4_e2b": 40.6, "deepseek_r1_1.5b": 32.1},
    "aime25": {"melt": 33.3, "ouro": 36.7, "qwen3_1.7b": 33.1},
    "aime26": {"melt": 41.0, "ouro": 44.0, "qwen3_1.7b": 31.7},
    "amc23": {"melt": 80.2, "ouro": 81.2, "qwen3_1.7b": 79.2, "gemma4_e2b": 82.7},
    "math500": {"melt": 93.4, "ouro": 94.4, "qwen3_1.7b": 90.6, "gemma4_e2b": 87.6},
    "olympiadbench": {"melt": 64.7, "ouro": 67.5, "qwen3_1.7b": 63.5},
    "gpqa": {"melt": 42.6, "ouro": 40.8, "qwen3_1.7b": 37.3, "qwen3.5_2b": 45.1},
    "mmlu_redux": {"melt": 74.2, "ouro": 74.2, "gemma4_e2b": 75.3},
    "humaneval": {"melt": 81.7, "ouro": 76.8, "qwen3_1.7b": 71.3},
    "hle": {"melt": 2.0},
}

# LLA Table 7 (broad suite, Ouro-1.4B, the teacher and LLA at four budgets; keyed like TABLE1).
# MMLU-Pro and BBH have no offline data here: they stay paper-only columns. HumanEval / MBPP are
# EvalPlus pass@1 on the base tests (the paper reports plus tests separately). Table 7's GSM8K column
# repeats Table 8's numbers (cold-start checkpoints), not Table 1's (see the reviewer's checklist).
TABLE7_SOURCE = "LLA paper, Table 7 (Ouro-1.4B)"
TABLE7 = {
    ("full", 1.0): {"gsm8k": 0.794, "humaneval": 0.707, "mbpp": 0.720, "math500": 0.74, "bbh": 0.708, "mmlu_pro": 0.481},
    ("lla", 1.33): {"gsm8k": 0.795, "humaneval": 0.756, "mbpp": 0.725, "math500": 0.70, "bbh": 0.705, "mmlu_pro": 0.467},
    ("lla", 2.0): {"gsm8k": 0.750, "humaneval": 0.744, "mbpp": 0.733, "math500": 0.63, "bbh": 0.677, "mmlu_pro": 0.469},
    ("lla", 3.2): {"gsm8k": 0.575, "humaneval": 0.591, "mbpp": 0.646, "math500": 0.72, "bbh": 0.495, "mmlu_pro": 0.399},
    ("lla", 4.0): {"gsm8k": 0.590, "humaneval": 0.610, "mbpp": 0.616, "math500": 0.52, "bbh": 0.527, "mmlu_pro": 0.416},
}

# LLA Table 8 (cold-start rank sweep, Ouro-1.4B): GSM8K exact match of LLA codecs distilled from their own
# SVD init at each ratio (the earlier streaming decoder; teacher on 100, codecs on 200 items), and the
# two-pass ("train") KL where the paper gives it; keyed like TABLE1. Its teacher is .820, not Table 1's .794.
TABLE8_SOURCE = "LLA paper, Table 8 (Ouro-1.4B, cold-start rank sweep, GSM8K)"
TABLE8_N = {"gsm8k": {"teacher": 100, "methods": 200}}
TABLE8 = {
    ("full", 1.0): {"gsm8k": 0.820},
    ("lla", 1.33): {"gsm8k": 0.795},
    ("lla", 2.0): {"gsm8k": 0.750, "kl": 0.0155},
    ("lla", 2.67): {"gsm8k": 0.575},
    ("lla", 3.2): {"gsm8k": 0.575},
    ("lla", 4.0): {"gsm8k": 0.590, "kl": 0.0160},
}
# report.paper_model -> Table 8's grid and source (Ouro-1.4B only)
TABLE8_BY_MODEL = {"Ouro-1.4B": (TABLE8, TABLE8_SOURCE)}

# LLA Table 9 (Ouro-1.4B, GSM8K, sink 4 + window 256 of ~1k-token 8-shot prompts: ~74% evicted): exact match
# under eviction over 8-bit quantisation (2x of bf16) and over LLA 4x, keyed like TABLE1; without eviction
# the text gives about .79 (eviction alone is not reported).
TABLE9_SOURCE = "LLA paper, Table 9 (Ouro-1.4B, GSM8K, sink 4 + window 256)"
TABLE9 = {("kv_quant", 2.0): {"gsm8k": 0.510}, ("lla", 4.0): {"gsm8k": 0.520}}
TABLE9_NO_EVICTION = 0.79

# LLA Table 10 (Ouro-1.4B, 4x, its short schedule of 300 steps): held-out KL of the full recipe (SVD init,
# 96/160 ranks, KL + attention matching) and of each variant that changes one thing; keyed by what changes.
# LLA Table 14 (Ouro-1.4B, decoupled RoPE at d_head 128): held-out KL and top-1 agreement; keyed by
# (the share of the head that keeps RoPE, query adapter, longer training). None: not reported.
TABLE14_SOURCE = "LLA paper, Table 14 (Ouro-1.4B, decoupled RoPE, held-out KL / top-1)"
TABLE14 = {"full_rope": {"kl": 0.059, "top1": 0.95},     # Table 1's 4x LLA; "about .95" top-1
           (0.5, False, False): {"kl": 0.55, "top1": None},
           (0.5, True, False): {"kl": 0.34, "top1": 0.84},
           (0.5, True, True): {"kl": 0.30, "top1": 0.88},
           (0.25, True, False): {"kl": 1.04, "top1": None}}

TABLE10_SOURCE = "LLA paper, Table 10 (Ouro-1.4B, 4x, 300 steps, held-out KL)"
TABLE10 = {"full": 0.105, "svd_loop1": 0.128, "random_init": 0.771, "symmetric": 0.129, "kl_only": 0.110}

# LLA Table 12 / Figure 8 (passkey exact recall, 15 trials a cell, 2k-64k tokens), as SPEC.md gives it:
# a summary per LLA compression ratio (keyed like TABLE1: method, ratio rounded to 2 decimals), not every cell.
TABLE12_SOURCE = "LLA paper, Table 12 / Figure 8 (Ouro-1.4B, 2k-64k tokens, 15 trials a cell)"
# 15 trials per (ratio, length) cell = 5 keys x 3 depths; the paper's boundary is drawn on those pooled
# cells. The 14.2x / 15.5x rows are Figure 8's only.
TABLE12_SOURCE_NOTE = "15 trials per (ratio, length) cell: 5 keys x 3 depths, pooled"
TABLE12 = {("full", 1.0): "1.00 everywhere", ("lla", 5.33): "1.00 everywhere", ("lla", 4.0): ".87 at 64k",
           ("lla", 10.67): "1.00 to 16k, .80 at 32k, .73 at 64k", ("lla", 14.2): "drops after 8k (Fig. 8)",
           ("lla", 15.5): "about .4 at every length (Fig. 8)", ("lla", 21.33): "mostly 0-.20"}
# Figure 8's 2.6B panel (Ouro-2.6B at 10.67x): out of memory at 64k, which is not a recall of 0.
FIG8_OURO_2_6B = {("lla", 10.67): "1.00 to 32k, OOM (not 0) at 64k"}
FIG8_OURO_2_6B_SOURCE = "LLA paper, Figure 8's Ouro-2.6B panel (2k-64k tokens)"
# report.paper_model -> the passkey summary Table 12 / Figure 8 set beside ours, and its source
TABLE12_BY_MODEL = {"Ouro-1.4B": (TABLE12, TABLE12_SOURCE), "Ouro-2.6B": (FIG8_OURO_2_6B, FIG8_OURO_2_6B_SOURCE)}

# LLA Table 4 (MATH-500 accuracy, off-policy vs on-policy distillation; no-answer rates), by ratio.
TABLE4_SOURCE = "LLA paper, Table 4 (Ouro-1.4B, MATH-500)"
TABLE4 = {3.2: {"off": 0.46, "on": 0.70, "no_answer_off": 0.21, "no_answer_on": 0.06},
          4.0: {"off": 0.43, "on": 0.66, "no_answer_off": 0.15, "no_answer_on": 0.03},
          5.33: {"off": 0.53, "on": 0.69, "no_answer_off": 0.12, "no_answer_on": 0.03},
          10.67: {"off": 0.65, "on": 0.69, "no_answer_off": 0.09, "no_answer_on": 0.07},
          21.33: {"off": 0.66, "on": 0.62, "no_answer_off": 0.11, "no_answer_on": 0.05}}

# LLA Table 5 (serving on one H200): KV bytes per token (KiB, bf16) and the largest batch at a 4k
# context, per (model, method, ratio); speeds of the two serving paths (LLA 4x full-memory vs the
# teacher in ms/token; the capacity path's peak throughput at 21.3x vs the teacher's, tokens/s).
TABLE5_SOURCE = "LLA paper, Table 5 (Ouro-1.4B / 2.6B, one H200, 4k context)"
TABLE5_FOOTPRINT = {("ouro-1.4b", "full", 1.0): {"kib": 768, "max_batch": 32},
                    ("ouro-1.4b", "lla", 4.0): {"kib": 192, "max_batch": 128},
                    ("ouro-1.4b", "lla", 21.33): {"kib": 36, "max_batch": 768},
                    ("ouro-2.6b", "full", 1.0): {"max_batch": 16},
                    ("ouro-2.6b", "lla", 4.0): {"max_batch": 64}}
TABLE5_SPEED = {"teacher": {"ms_per_token": 63.6, "peak_tokens_per_s": 748},
                "lla full": {"ms_per_token": 74.1},
                "lla latent": {"peak_tokens_per_s": 108, "note": "at 21.3x"}}

# LLA Table 13 (random-weight kernel benchmark, 262144-token context): the absorbed kernel vs the
# teacher's attention (ms/token), and its speed-up over reconstruct-then-attend.
TABLE13_SOURCE = "LLA paper, Table 13 (random weights, 262144-token context)"
# The paper's kernel is the decoupled-RoPE absorbed kernel timed per generated token on an H200; ours
# are timed per call (the absorbed row is its counterpart): only the ratios compare, not the milliseconds.
TABLE13 = {"context": 262144, "fused_ms": 4.25, "teacher_ms": 4.46, "speedup_vs_reconstruct": 2.30,
           "kernel": "decoupled-RoPE absorbed kernel, ms/token, H200"}
