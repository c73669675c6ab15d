"""Latent-attention kernels: attention read directly from LLA's stored latents, as a torch reference
and tiled path (latent_attention.py), a Triton kernel for CUDA (triton_latent_attention.py) and C++
kernels for the CPU (cpu_latent_attention.py over cpu_latent_attention.cpp; cpu_latent_encode.cpp,
LLA's serving encode), built at first use by cpu_kernels.py.

Only tensors in, tensors out: the caches (cache/lla.py) and the benchmarks (serve/) call them;
nothing here imports either."""
