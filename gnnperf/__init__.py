"""gnnperf: predict deep-learning training iteration time from the computation graph."""

__version__ = "0.1.0"
