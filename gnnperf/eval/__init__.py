"""Evaluation: metrics, comparison tables and plots for the predictor and its baselines."""
