"""Experiment runner: YAML configs → jobs → results tables compared with the paper."""

from .config import Config, ConfigError, load_config, quick_config
from .executors import ExecutorError
from .jobs import derive_seed
from .run import Cell, RunResult, rerender_config, run_config

__all__ = [
    "Cell",
    "Config",
    "ConfigError",
    "ExecutorError",
    "RunResult",
    "derive_seed",
    "load_config",
    "quick_config",
    "rerender_config",
    "run_config",
]
