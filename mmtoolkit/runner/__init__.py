"""Experiment runner: YAML configs → jobs → results tables compared with the paper."""

from .config import Config, ConfigError, load_config
from .run import Cell, RunResult, run_config

__all__ = ["Cell", "Config", "ConfigError", "RunResult", "load_config", "run_config"]
