"""Serving: bytes per token, capacity, latency/throughput, latent-attention kernels."""
