"""Serving latency harness: the peak-memory probe of a CPU run (tensor bytes, from the allocator's
events) sees at least the cache the run leaves allocated, grows with it, and repeats exactly; rows
carry every method, paired ratios."""
import torch

from loopkv.cache import make_cache
from loopkv.serve.bench import random_model
from loopkv.serve.latency import Served, cpu_peak_growth, interleaved, timed_run

ARCH = {"vocab_size": 256, "hidden_size": 64, "num_hidden_layers": 2, "total_ut_steps": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128}


def _teacher():
    model = random_model(ARCH, torch.float32, "cpu")
    return Served("teacher", model, lambda: make_cache("full", model.config))


def test_cpu_peak_growth_covers_the_cache_and_grows_with_it():
    served = _teacher()
    small, large = torch.randint(3, 256, (1, 16)), torch.randint(3, 256, (16, 256))
    cache_bytes = timed_run(served, large, 2)["cache_bytes"]       # what the large run leaves allocated
    peak_small, peak_large = cpu_peak_growth(served, small, 2), cpu_peak_growth(served, large, 2)
    assert peak_large >= cache_bytes > 0
    assert peak_large > peak_small + cache_bytes // 2
    assert cpu_peak_growth(served, large, 2) == peak_large      # the same run, the same bytes


def test_cpu_peak_growth_counts_a_runs_tensors_exactly():
    """A model whose forward holds one known tensor at its peak: the probe sees exactly its bytes on
    top of what the run's other tensors need."""
    served = _teacher()
    prompt = torch.randint(3, 256, (2, 16))
    base = cpu_peak_growth(served, prompt, 1)
    held = torch.Size([1 << 20])                     # 4 MiB of float32, allocated and freed in one forward

    def forward(*args, **kwargs):
        ballast = torch.ones(held)
        out = plain(*args, **kwargs)
        del ballast
        return out
    plain, served.model.forward = served.model.forward, forward
    assert cpu_peak_growth(served, prompt, 1) == base + 4 * held.numel()


def test_interleaved_rows_pair_every_method_with_the_reference():
    served = _teacher()
    other = Served("teacher again", served.model, served.new_cache)
    rows = interleaved([served, other], [1, 2], prompt_len=8, new_tokens=2, rounds=2, warmup=1,
                       vocab_size=ARCH["vocab_size"])
    assert [(r["method"], r["batch"]) for r in rows] == [("teacher", 1), ("teacher again", 1),
                                                         ("teacher", 2), ("teacher again", 2)]
    assert all(r["throughput_ratio_to_reference"] > 0 and r["peak_bytes"] > 0 for r in rows)
    assert rows[0]["throughput_ratio_to_reference"] == 1.0 and rows[0]["throughput_ratio_range"] == [1.0, 1.0]
    assert all(r["throughput_ratio_range"][0] <= r["throughput_ratio_to_reference"] <= r["throughput_ratio_range"][1]
               for r in rows)


def test_every_served_method_keeps_to_its_model_device():
    """Prefill and decode of every served method with the model and the prompt on the meta device: a
    stand-in for a GPU that a CPU can run, where any tensor a method or model builds on the default
    device instead meets a meta tensor and fails (the first GPU serving run died of exactly that: a
    MELT student built on the CPU beside a CUDA teacher)."""
    from loopkv.serve.bench import served_methods

    methods = {"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {"4x": 4.0}}
    teacher = random_model(ARCH, torch.float32, "meta")
    prompt = torch.randint(3, 256, (2, 8)).to("meta")
    served = served_methods(teacher, methods, "4x")
    assert [s.name for s in served] == ["teacher", "lla 4x full", "lla 4x latent", "lla 4x fused", "melt"]
    for method in served:
        with torch.no_grad():
            cache = method.new_cache()
            token = method.model(prompt, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
            for _ in range(2):
                token = method.model(token, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
        assert token.device.type == "meta" and cache.get_seq_length() == 10, method.name
