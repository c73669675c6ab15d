"""Serving measurements: bytes per token, capacity and decode latency/throughput of the served
methods (LLA Table 5), and the latent-attention kernels' speed (Table 13; the kernels themselves
are loopkv.kernels)."""
