"""Measuring one training (or inference) iteration of a model on synthetic data.

- :mod:`gnnperf.measure.workload`: what is measured (:class:`Workload`) and how (:class:`MeasureSettings`);
  cheap to import (no torch).
- :mod:`gnnperf.measure.harness`: :func:`measure`, the timing loop.
- :mod:`gnnperf.measure.runner`: :func:`measure_ref` (in-process) and :func:`run_isolated` (fresh subprocess,
  so a hard crash costs one sample).

This package deliberately imports nothing heavy here so that ``gnnperf.measure.workload`` stays cheap.
"""
