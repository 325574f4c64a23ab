"""Samples and datasets: the sample schema and store, public-table adapters, the PyG dataset and splits."""
