"""Where a command computes: one rule for every command that touches a model (config `launch.device`).

    auto      CUDA when this process sees a GPU (under torchrun / srun: cuda:LOCAL_RANK), else the CPU
    cpu       the CPU, even on a GPU node
    cuda      a GPU (cuda:LOCAL_RANK under a launcher, the current device otherwise); an error without one
    cuda:N    GPU N (one-rank jobs only: several ranks on one GPU would contend for it)
    lazy      PyTorch's lazy-tensor device, computed on the CPU through its TorchScript backend. It is a
              second device on a CPU-only machine: a tensor left on the CPU beside one on `lazy` fails the
              way it would beside a CUDA tensor, so the tests run commands on it to find such tensors.
              Slow; never for results.

Models, codecs and caches are built on the resolved device; functions that take a model move their
token batches to the model's device (`model_device`) and bring scalars and lists back to the host.
"""
from __future__ import annotations

import os
import re

import torch

from loopkv.errors import LoopKVError

DEVICE_PATTERN = r"^(auto|cpu|lazy|cuda(:[0-9]+)?)$"
_resolved: list[torch.device] = []     # what this process computes on, for its results' provenance


def _local_rank() -> int | None:
    """This process's rank on its node when a launcher (torchrun, deepspeed) started it."""
    return int(os.environ["LOCAL_RANK"]) if "LOCAL_RANK" in os.environ else None


def resolve_device(spec: str | None = "auto") -> torch.device:
    """The device a `launch.device` value names on this machine and rank; LoopKVError if it cannot be used."""
    device = _resolve(spec)
    _resolved.append(device)
    return device


def resolved_device() -> str | None:
    """The device this process resolved last (None: it computes on no model), as results record it."""
    return describe(_resolved[-1]) if _resolved else None


class _StrictDevices(torch.overrides.TorchFunctionMode):
    """On the lazy device, any op given tensors on two devices fails, as CUDA's do: the lazy backend
    itself accepts e.g. CPU indices into an embedding, which CUDA refuses. As on CUDA, a 0-dim CPU
    tensor may join any op, copies and moves may cross devices, and indexing takes host indices."""

    CROSSING = {"to", "cpu", "cuda", "copy_", "__getitem__", "__setitem__", "__get__", "__set__", "type",
                "new_tensor", "tensor", "as_tensor", "equal", "_has_compatible_shallow_copy_type", "set_"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") not in self.CROSSING:
            devices = {t.device.type for t in _tensors(args, kwargs) if t.dim() > 0}
            if len(devices) > 1:
                raise RuntimeError(f"{getattr(func, '__qualname__', func)} got tensors on {sorted(devices)}: "
                                   "CUDA refuses tensors on two devices (utils/device.py)")
        return func(*args, **kwargs)


_STRICT = _StrictDevices()
_STRICT.active = False


def release_strict_devices() -> None:
    """End the lazy device's two-device check in this process (tests that share a process with others)."""
    if _STRICT.active:
        _STRICT.__exit__(None, None, None)
        _STRICT.active = False


def _tensors(args, kwargs):
    for value in (*args, *kwargs.values()):
        if torch.is_tensor(value):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if torch.is_tensor(v))


def device_peak_bytes() -> int | None:
    """The CUDA allocator's peak in this process so far, on the device it resolved (None off CUDA)."""
    if not _resolved or _resolved[-1].type != "cuda":
        return None
    return int(torch.cuda.max_memory_allocated(_resolved[-1]))


def _resolve(spec: str | None) -> torch.device:
    spec = "auto" if spec is None else str(spec).strip()
    if not re.match(DEVICE_PATTERN, spec):
        raise LoopKVError(f"launch.device: {spec!r} is not auto, cpu, cuda, cuda:N or lazy")
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "lazy":
        from torch._lazy import ts_backend

        if not getattr(ts_backend, "_loopkv_ready", False):   # init once per process
            ts_backend.init()
            ts_backend._loopkv_ready = True
        if not _STRICT.active:   # for the rest of the process (release_strict_devices ends it)
            _STRICT.__enter__()
            _STRICT.active = True
        return torch.device("lazy")
    if not torch.cuda.is_available():
        raise LoopKVError(f"launch.device is {spec!r} but this process sees no CUDA device "
                          f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                          "use auto or cpu, or run on a GPU node with a CUDA build of torch")
    rank = _local_rank()
    index = torch.device(spec).index
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if index is None:
        index = rank if rank is not None else torch.cuda.current_device()
    elif world > 1:
        raise LoopKVError(f"launch.device {spec!r} pins one GPU, but {world} ranks run: use cuda or auto "
                          "(each rank takes cuda:LOCAL_RANK)")
    if index >= torch.cuda.device_count():
        raise LoopKVError(f"launch.device: cuda:{index} does not exist ({torch.cuda.device_count()} GPU(s) visible; "
                          "under torchrun each rank needs its own GPU)")
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def place(model: torch.nn.Module, device: torch.device | str) -> torch.nn.Module:
    """`model` moved to `device`. On the lazy device each forward also ends its recorded graph there
    (mark_step): a streamed decode would otherwise grow one graph over every step (15 GB and 700x
    slower in a cloze shard, measured)."""
    model = model.to(device)
    if torch.device(device).type == "lazy" and not getattr(model, "_loopkv_step_hook", False):
        from torch import _lazy

        model.register_forward_hook(lambda *_: _lazy.mark_step())
        model._loopkv_step_hook = True
    return model


def to_host(obj):
    """`obj` (tensors in dicts, lists, tuples) with every tensor in host memory: what checkpoint files
    hold, so they load on any machine (and torch.save cannot read lazy storages)."""
    if torch.is_tensor(obj):
        return obj.detach().cpu() if obj.device.type != "cpu" else obj
    if isinstance(obj, dict):
        return type(obj)((k, to_host(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(to_host(v) for v in obj)
    return obj


def model_device(module: torch.nn.Module) -> torch.device:
    """Where a model's weights live (the device its inputs must be on)."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for queued work: CUDA kernels, or the lazy device's pending graph."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "lazy":
        from torch import _lazy

        _lazy.mark_step()
        _lazy.wait_device_ops()


def describe(device: torch.device) -> str:
    """The device as results record it: the GPU's name on CUDA."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)
