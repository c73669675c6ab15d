"""The one DeepSpeed engine wrapper every post-training stage uses (codec distillation, MELT stages).

The same code runs the tiny default on CPU (DS_ACCELERATOR=cpu, gloo, one process) and paper scale
on GPUs (nccl, one process per GPU under `deepspeed`/`torchrun`). ZeRO stage from config; the
learning rate is set every step from the caller's schedule (a function of the step, so a resumed
run computes the same updates as an uninterrupted one). Checkpoints are DeepSpeed's own (optimizer
state partitioned per rank); `latest` is written after a tag is complete, so a kill mid-save
resumes from the previous tag (we write `latest` atomically ourselves). Frozen parameters (the teacher) are never written.

DeepSpeed JIT-compiles a small C++ op the first time (tens of seconds on CPU); torch caches it in
TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions), so later runs start in about a second.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
from pathlib import Path

import torch

from loopkv.errors import LoopKVError
from loopkv.utils.atomic import write_text
from loopkv.utils.device import model_device, to_host
from loopkv.utils.extensions import clear_stale_build_locks

LATEST = "latest"
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(device: torch.device | None = None):
    """Import DeepSpeed for this machine and join (or create) the process group. `device`: where the
    module lives; a CPU or lazy device selects DeepSpeed's CPU accelerator (on a GPU node too)."""
    if not torch.cuda.is_available() or (device is not None and device.type in ("cpu", "lazy")):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    clear_stale_build_locks()
    import deepspeed

    if device is not None and device.type == "lazy":
        _use_lazy_accelerator()

    if not torch.distributed.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if "RANK" in os.environ:   # started by deepspeed / torchrun / srun with the rendezvous set
            deepspeed.init_distributed(dist_backend=backend, verbose=False)
        else:
            # a plain `python` launch is a world of one, on a private port kept out of os.environ,
            # so child processes (e.g. rules started from a test) do not inherit it; DeepSpeed's
            # engine still reads LOCAL_RANK
            os.environ.setdefault("LOCAL_RANK", "0")
            deepspeed.init_distributed(dist_backend=backend, verbose=False, auto_mpi_discovery=False,
                                       init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    return deepspeed


def _use_lazy_accelerator() -> None:
    """DeepSpeed's CPU accelerator, naming the lazy device as its own (utils/device.py), so the engine
    keeps the module where it is and the placement tests train through DeepSpeed as on a GPU."""
    from deepspeed.accelerator import get_accelerator, set_accelerator
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

    if get_accelerator().device_name() == "lazy":
        return

    class LazyAccelerator(CPU_Accelerator):
        def device_name(self, device_index=None):
            return "lazy"

        def current_device_name(self):
            return "lazy"

        def device(self, device_index=None):
            return torch.device("lazy")

    set_accelerator(LazyAccelerator())


def _check_device(device: torch.device, engine_device: torch.device) -> None:
    """The engine must compute where the command put the model: DeepSpeed moves the module to its
    accelerator's device, which would leave caches, codec rows and batches behind."""
    same = device.type == engine_device.type and (device.type != "cuda" or device.index == engine_device.index)
    if not same:
        raise LoopKVError(f"DeepSpeed trains on {engine_device} but the model was placed on {device} "
                          "(launch.device); under torchrun each rank uses cuda:LOCAL_RANK, so use auto or cuda")


def ds_config(cfg: dict, world_size: int) -> dict:
    """DeepSpeed config from a training section (batch_size, grad_clip, zero_stage, dtype)."""
    if cfg["batch_size"] % world_size:
        raise LoopKVError(f"batch_size {cfg['batch_size']} is not divisible by the {world_size} ranks")
    return {
        "train_batch_size": cfg["batch_size"],
        "train_micro_batch_size_per_gpu": cfg["batch_size"] // world_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": cfg["grad_clip"],
        "zero_optimization": {"stage": cfg["zero_stage"]},
        "bf16": {"enabled": cfg.get("dtype") == "bfloat16"},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }


class Engine:
    """DeepSpeed engine over `module`, optimising the parameters that require grad with AdamW."""

    def __init__(self, module: torch.nn.Module, cfg: dict):
        device = model_device(module)
        if device.type == "lazy" and cfg["zero_stage"] > 0:
            raise LoopKVError("the lazy device trains with zero_stage 0 only (ZeRO's flat buffers fail in its "
                              "TorchScript backend)")
        deepspeed = init_distributed(device)
        self.world_size = torch.distributed.get_world_size()
        self.rank = torch.distributed.get_rank()
        trainable = [p for p in module.parameters() if p.requires_grad]
        if not trainable:
            raise LoopKVError("nothing to train: no parameter requires grad")
        optimizer = torch.optim.AdamW(trainable, lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8,
                                      weight_decay=cfg["weight_decay"])
        self.engine, self.optimizer, _, _ = deepspeed.initialize(
            model=module, optimizer=optimizer, config=ds_config(cfg, self.world_size))
        _check_device(device, self.engine.device)
        self.device = device
        if device.type == "lazy":   # torch.save cannot read lazy storages: DeepSpeed's files get host copies
            engine_save = self.engine.checkpoint_engine.save
            self.engine.checkpoint_engine.save = lambda state_dict, path: engine_save(to_host(state_dict), path)

    def __call__(self, *args, **kwargs):
        return self.engine(*args, **kwargs)

    @property
    def module(self) -> torch.nn.Module:
        return self.engine.module

    def step(self, loss: torch.Tensor, lr: float) -> float:
        """Backward, clip, update at learning rate `lr`; returns the pre-clip gradient norm."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.engine.backward(loss)
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")

    def state_fingerprint(self) -> dict[str, str]:
        """sha256 of this rank's trainable weights and of its optimizer state (fp32 master partitions,
        moments, step counts): equal fingerprints = equal state, so a resumed run can show that what
        it restored is what the interrupted run saved, and where two runs' states part."""
        def digest(tensors) -> str:
            h = hashlib.sha256()
            for t in tensors:
                h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            return h.hexdigest()[:16]

        weights = [p for _, p in sorted(self.module.named_parameters()) if p.requires_grad]
        inner = getattr(self.optimizer, "optimizer", self.optimizer)     # ZeRO wraps the torch optimizer
        state = []
        for group in inner.param_groups:
            for p in group["params"]:
                state.append(p)
                for key in sorted(inner.state.get(p, {})):
                    value = inner.state[p][key]
                    state.append(value if torch.is_tensor(value) else torch.tensor(float(value)))
        return {"weights": digest(weights), "optimizer": digest(state)}

    def mean_over_ranks(self, values: dict[str, float]) -> dict[str, float]:
        """Each rank's scalars (its shard's losses) -> their mean over ranks: the global batch's."""
        if self.world_size == 1:
            return values
        keys = sorted(values)
        # on the engine's device: NCCL reduces CUDA tensors only
        stacked = torch.tensor([values[k] for k in keys], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(stacked)
        return {k: float(v) / self.world_size for k, v in zip(keys, stacked)}

    def _own(self, directory: str | os.PathLike) -> Path:
        """The checkpoint folder of this world size: ZeRO partitions the optimizer state per rank, so
        a checkpoint resumes only with the number of ranks that wrote it."""
        return Path(directory) / f"world{self.world_size}"

    def save(self, directory: str | os.PathLike, step: int, client_state: dict, keep: int = 2) -> Path:
        """Write the checkpoint of `step`; returns its directory."""
        directory = self._own(directory)
        tag = f"step{step:08d}"
        # DeepSpeed writes `latest` in place (truncate, then write): a kill between the two leaves it
        # empty. We write it ourselves, atomically, once every rank's files of the tag are complete.
        self.engine.save_checkpoint(str(directory), tag=tag, client_state=client_state,
                                    exclude_frozen_parameters=True, save_latest=False)
        torch.distributed.barrier()
        if self.rank == 0:
            write_text(directory / LATEST, tag)
            # older tags are dead weight once `latest` points past them
            tags = sorted(p for p in directory.glob("step*") if p.is_dir())
            for old in tags[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
        torch.distributed.barrier()
        return directory / tag

    def load(self, directory: str | os.PathLike) -> dict | None:
        """The client state of the latest checkpoint (engine state restored), or None."""
        directory = self._own(directory)
        if not (directory / LATEST).exists():
            return None
        try:
            path, client_state = self.engine.load_checkpoint(
                str(directory), load_module_strict=False, load_optimizer_states=True,
                load_lr_scheduler_states=False)
        except Exception as e:   # DeepSpeed/torch raise many types for torn or corrupt files
            raise LoopKVError(f"DeepSpeed checkpoint in {directory} is corrupt or truncated "
                              f"({type(e).__name__}: {e}); delete it to restart") from e
        if path is None:
            raise LoopKVError(f"DeepSpeed checkpoint in {directory} could not be loaded; delete it to restart")
        return client_state
