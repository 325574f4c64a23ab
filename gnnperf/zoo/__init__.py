"""The networks whose time is predicted: parametric families and the model-reference resolver."""

__all__ = ["ModelSpec", "parse_input_shape", "resolve"]


def __getattr__(name: str):
    # Lazy: resolve imports torch, and `gnnperf zoo list` / the CLI parser should not pay for it.
    if name in __all__:
        from gnnperf.zoo import resolve as _resolve

        return getattr(_resolve, name)
    raise AttributeError(name)
