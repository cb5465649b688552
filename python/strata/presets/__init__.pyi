from typing import Any, Dict, List, Optional

from ..data import Dataset
from ..keras.models import Model
from ..keras.optimizers import schedules as _schedules

class Recipe:
    preset: str
    data: str
    val: str
    image_key: str
    label_key: str
    image_size: int
    channels: int
    classes: int
    pad_crop: int
    flip: float
    model: str
    weights: str
    freeze_until: str
    freeze_backbone_epochs: int
    epochs: int
    steps_per_epoch: int
    validation_steps: int
    batch_per_replica: int
    replicas: int
    optimizer: str
    lr: float
    lr_scaling: str
    schedule: str
    warmup_epochs: float
    weight_decay: float
    label_smoothing: float
    ema: float
    tta: str
    metrics: List[str]
    precision: str
    seed: int
    deterministic: bool
    checkpoint_dir: str
    resume: bool
    out: str
    tensorboard: str
    monitor: bool
    monitor_interval: float
    monitor_port: int
    monitor_bind: str
    trace: str
    report_json: str
    verbose: int
    default_data: str
    resize_spec_file: bool
    val_split: str
    def __init__(self) -> None: ...
    @staticmethod
    def fields() -> List[str]: ...
    def copy(self) -> Recipe: ...

class TrainResult:
    chief: bool
    history: Dict[str, List[float]]
    epoch: List[int]
    val_loss: float
    val_accuracy: float
    val_f1_macro: float
    val_accuracy_tta: float
    model_path: str
    replicas: int
    global_batch: int
    steps_per_epoch: int
    wall_seconds: float
    train_seconds: float
    validation_seconds: float
    images_per_second: float
    seconds_at_epoch_end: List[float]
    cross_host_json: str
    def __init__(self, report: Dict[str, Any]) -> None: ...

class Schedule(_schedules.LearningRateSchedule):
    def __init__(self, cc: Any) -> None: ...
    def __call__(self, step: int) -> float: ...
    @property
    def description(self) -> str: ...

class Preset:
    name: str
    def __init__(self, name: str) -> None: ...
    def recipe(self, **overrides: Any) -> Recipe: ...
    def dataset(self, pattern: Optional[str] = ..., training: bool = ..., replicas: Optional[int] = ...,
                **overrides: Any) -> Dataset: ...
    def schedule(self, steps_per_epoch: int, replicas: Optional[int] = ..., **overrides: Any) -> Schedule: ...
    def model(self, **overrides: Any) -> Model: ...

fashion_mnist: Preset
flowers: Preset

def recipe(preset: Optional[str] = ..., **overrides: Any) -> Recipe: ...
def train(recipe_: Optional[Recipe] = ..., *, preset: Optional[str] = ..., **overrides: Any) -> TrainResult: ...
