"""Thin Hydra entry points: each ``main(cfg)`` calls a function that returns its results."""

from pathlib import Path

# The repository's conf/ (absolute: Hydra reads a relative path as a Python module under console scripts).
CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")
