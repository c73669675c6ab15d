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
    ("lla", 21.33): {"gsm8k": 0.740},
    ("mla_head", 21.33): {"gsm8k": 0.680},
    ("lla2d", 21.33): {"gsm8k": 0.723},
}

# MELT (Ouro-1.4B-Thinking post-trained into MELT-1.6B). Gate ablation, paper Table 3: AIME24
# pass@1 of each state update; component ablation, paper Table 4: only "without chunk-wise
# training = 0.0%" is stated in our source (the full recipe's row is Table 3's element-wise gate).
MELT_SOURCE = "MELT paper, Tables 3-4 (AIME24 pass@1, %)"
MELT_TABLE3 = {"full": 44.8, "single": 34.4, "last": 33.7, "ema": 30.2, "mean": 29.0}
MELT_TABLE4 = {"full": 44.8, "no_chunk": 0.0}
# Memory at 32k generated tokens (GB, whole process on GPU): MELT vs Ouro-1.4B-Thinking vs Qwen3-1.7B;
# the KV cache itself is 4x smaller (one row per layer instead of T = 4).
MELT_MEMORY = {"source": "MELT paper, Section 5 (32k generated tokens)", "tokens": 32768,
               "total_gb": {"melt": 9.49, "ouro": 27.97, "qwen3_1.7b": 7.07}, "kv_ratio": 4.0,
               "ouro_kv_gb": 25.17, "ouro_weights_gb": 2.87}
