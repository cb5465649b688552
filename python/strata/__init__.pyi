from typing import Any, List, Optional

from . import data as data
from . import distribute as distribute
from . import errors as errors
from . import io as io
from . import keras as keras
from . import monitor as monitor
from . import presets as presets

__version__: str

class Device:
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
    peak_provisional: bool
    def __init__(self, hostname: str, cpu_model: str, cores: int, cpu_ids: List[int], isa: List[str],
                 memory_bytes: int, replicas: int, peak_f32_gflops_per_core: float,
                 peak_bf16_gflops_per_core: float, f32_kernel: str, bf16_kernel: str, peak_from_cache: bool,
                 precisions: List[str], peak_provisional: bool = ...) -> None: ...
    @property
    def device_type(self) -> str: ...

def devices(recalibrate: bool = ...) -> List[Device]: ...

def train(recipe: Optional[presets.Recipe] = ..., *, preset: Optional[str] = ..., **kwargs: Any) -> presets.TrainResult: ...
