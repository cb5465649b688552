"""strata.Device: one host as `strata devices` describes it (the dict the extension returns)."""
from dataclasses import dataclass
from typing import List


@dataclass(frozen=True)
class Device:
    """A host a job can train on: its usable cores (a replica is a core), ISA and calibrated peak.

    ``peak_f32_gflops_per_core`` / ``peak_bf16_gflops_per_core`` are measured on this machine
    (cached per machine; ``strata.devices(recalibrate=True)`` measures again); the monitor's
    utilization % divides by them. ``peak_bf16_gflops_per_core`` is 0 without AVX512_BF16.
    ``peak_provisional``: the figure may be low and is measured again at the next start.
    """

    hostname: str
    cpu_model: str
    cores: int
    cpu_ids: List[int]
    isa: List[str]
    memory_bytes: int
    replicas: int
    peak_f32_gflops_per_core: float
    peak_bf16_gflops_per_core: float
    f32_kernel: str
    bf16_kernel: str
    peak_from_cache: bool
    precisions: List[str]
    # The figure may be low (measured on a busy machine, or raised to a rate a run executed):
    # the next start measures it again (docs/monitor.md, "The peak").
    peak_provisional: bool = False

    @property
    def device_type(self) -> str:
        """``"CPU"``, as tf.config.PhysicalDevice.device_type says (a Strata replica is a core)."""
        return "CPU"
