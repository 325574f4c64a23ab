"""Model reference -> OpGraph: resolve, export (or read the ONNX file), build the IR, cache it."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from gnnperf.errors import GnnperfError
from gnnperf.graph.export import (
    EXPORT_BATCH,
    OPSET,
    Exported,
    export_model,
    fix_input_shape,
    load_onnx,
    onnx_input_shape,
)
from gnnperf.graph.ir import IR_VERSION, OpGraph, build_ir
from gnnperf.graph.repeat import repeat_block
from gnnperf.zoo.resolve import ModelSpec, resolve

log = logging.getLogger(__name__)
# Bump when the same hf config builds another graph (2: torch_dtype ignored, tied weights counted once by the dynamo
# exporter): its cached graphs are built again, and only those (IR_VERSION would re-export every graph).
HF_READ_VERSION = 2
# The same for graphs read from ONNX files (2: integer initializers are not trainable parameters).
ONNX_READ_VERSION = 2
SHALLOW_ABOVE = 4  # stacks deeper than this are exported with two blocks and repeated (see .repeat)


def default_cache_dir() -> Path:
    return Path(os.environ.get("GNNPERF_CACHE", Path.home() / ".cache" / "gnnperf")) / "graphs"


class GraphCache:
    """OpGraphs on disk, keyed by (model reference, per-sample input shape, IR_VERSION, opset, exporter).

    Until FEATURE_VERSION 2 the key held FEATURE_VERSION (then 1, the same number as IR_VERSION 1, so the keys are
    unchanged): features are computed from the IR when a graph is loaded and need no new export.
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else default_cache_dir()
        # the files read or written through this instance since a dataset's processing cleared it (it records them)
        self.used: set[Path] = set()

    @staticmethod
    def key(ref: str, input_shape: tuple[int, ...], exporter: str = "auto") -> str:
        ident = json.dumps([ref, list(input_shape), IR_VERSION, OPSET, exporter])
        return hashlib.sha256(ident.encode()).hexdigest()[:20]

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json.gz"

    def get(self, key: str) -> OpGraph | None:
        p = self.path(key)
        if not p.exists():
            return None
        try:
            with gzip.open(p, "rt") as f:
                graph = OpGraph.from_dict(json.load(f))
            self.used.add(p)
            return graph
        except (OSError, EOFError, ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable graph cache entry %s: %s", p, e)
            return None

    def put(self, key: str, graph: OpGraph) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.path(key).with_suffix(f".tmp{os.getpid()}")
            with gzip.open(tmp, "wt", compresslevel=1) as f:
                json.dump(graph.to_dict(), f, separators=(",", ":"))
            os.replace(tmp, self.path(key))  # atomic: readers never see half a file
            self.used.add(self.path(key))
        except OSError as e:
            log.warning("cannot write graph cache %s: %s", self.root, e)


def build_graph(
    ref: str | ModelSpec,
    input_shape: tuple[int, ...] | None = None,
    exporter: str = "auto",
    cache: GraphCache | None = None,
    shallow: bool | None = None,
    export_batch: int = EXPORT_BATCH,
    cached_only: bool = False,
) -> OpGraph:
    """The OpGraph of a model reference, from the cache when present.

    Args:
        input_shape: per-sample input shape; the model's default when ``None``.
        exporter: ``auto``, ``torchscript`` or ``dynamo``.
        cache: where graphs persist; ``None`` disables caching.
        shallow: export two blocks and repeat them (``None``: only for stacks deeper than ``SHALLOW_ABOVE``).
        export_batch: batch of the example input used for tracing (tests compare two of them).
        cached_only: never export; a graph missing from ``cache`` raises :class:`GnnperfError`.
    """
    spec = resolve(ref) if isinstance(ref, str) else ref
    depth = spec.num_layers
    use_shallow = bool(depth and depth > 2 and (shallow if shallow is not None else depth > SHALLOW_ABOVE))
    if spec.input_kind == "onnx":
        exported = load_onnx(spec.onnx_path)
        try:
            as_exported = onnx_input_shape(exported)
        except GnnperfError:  # symbolic non-batch dims: the caller's shape is needed
            as_exported = None
        if input_shape and as_exported and tuple(input_shape) != as_exported:
            # its ops' shapes were fixed at export: the costs would stay those of the exported shape
            raise GnnperfError(
                f"{spec.ref} was exported at input shape {','.join(map(str, as_exported))} and is priced as "
                f"exported; export it again at {','.join(map(str, input_shape))}"
            )
        shape = tuple(input_shape) if input_shape else onnx_input_shape(exported)
        if as_exported is None:
            fix_input_shape(exported, shape)
    else:
        exported = None
        shape = spec.input_shape(input_shape)
        if not shape:
            raise GnnperfError(f"{spec.ref} has no default input shape; give one (--input-shape 3,224,224)")
    ident = spec.ref
    if spec.onnx_path is not None:  # the same path may hold another graph tomorrow
        ident += "#" + hashlib.sha256(spec.onnx_path.read_bytes()).hexdigest()[:16] + f"-r{ONNX_READ_VERSION}"
    key = GraphCache.key(ident, shape, exporter) + ("-shallow" if use_shallow else "") + f"-b{export_batch}"
    source = _source_digest(spec)
    built_with = _built_with(spec)
    hit = cache.get(key) if cache is not None else None
    # a graph cached before the file it was built from (or a module beside it) changed is stale (entries without a
    # digest are kept)
    fresh = hit is not None and (source is None or hit.meta.get("source_sha256") in (None, source))
    if fresh and any(_file_digest(Path(f)) != d for f, d in hit.meta.get("local_sources", {}).items()):
        log.info("a module %s imports changed since its graph was built: building it again", spec.ref)
        fresh = False
    if fresh:
        was = hit.meta.get("built_with")
        if was is None or was == built_with:  # entries from before versions were recorded are kept
            return hit
        if cached_only:  # a dataset of cached graphs keeps them; rebuilding is `gnnperf data graphs`'s job
            _warn_once(f"graphs in {cache.root} were built with {was}, installed {built_with}: "
                       "`gnnperf data graphs` builds them again")  # fmt: skip
            return hit
        log.info("graph of %s was built with %s, installed %s: building it again", spec.ref, was, built_with)
    if cached_only:
        where = cache.root if cache is not None else "(no cache given)"
        raise GnnperfError(f"graph of {spec.ref} at {','.join(map(str, shape))} is not in the cache {where}")
    graph = _export_ir(spec, shape, exporter, use_shallow, export_batch, exported)
    graph.meta["family"] = spec.family
    graph.meta["input_kind"] = spec.input_kind
    if source is not None:
        graph.meta["source_sha256"] = source
    local = _local_sources(spec)
    if local:
        graph.meta["local_sources"] = local
    graph.meta["built_with"] = built_with
    if cache is not None:
        cache.put(key, graph)
    return graph


def _export_ir(
    spec: ModelSpec,
    shape: tuple[int, ...],
    exporter: str,
    shallow: bool,
    export_batch: int,
    exported: Exported | None = None,
) -> OpGraph:
    """Export (unless ``exported`` is an ONNX file's) and build the IR, two blocks repeated where ``shallow``.

    A stack whose blocks are not two distinct copies (ALBERT applies one shared layer ``depth`` times, so its
    graph names a single layer) cannot be repeated: it is exported whole instead.
    """

    def ir(e: Exported) -> OpGraph:
        return build_ir(e.model, spec.ref, shape, e.exporter, e.model_inputs, e.trainable)

    depth = 2 if shallow else None
    if exported is None:
        exported = export_model(spec, shape, exporter, depth, export_batch)
    try:
        graph = ir(exported)
    except GnnperfError as e:
        # the TorchScript exporter writes some splits as ONNX sequences built in a Loop (torchvision's MViT:
        # tensor_split in its pooling), whose shapes no static inference follows; the dynamo exporter writes them
        # as slices. ``auto`` tries it before giving up (graphs that build from TorchScript are unchanged)
        if exporter != "auto" or exported.exporter != "torchscript":
            raise
        log.info("%s; exporting with the dynamo exporter instead", e)
        try:
            graph = ir(export_model(spec, shape, "dynamo", depth, export_batch))
        except GnnperfError as e2:
            raise GnnperfError(f"{e} (TorchScript export); with the dynamo exporter: {e2}") from None
    if not shallow:
        return graph
    try:
        return repeat_block(graph, spec.num_layers, spec.layer_scope)
    except GnnperfError as e:
        log.info("%s; exporting all %d blocks instead", e, spec.num_layers)
        return _export_ir(spec, shape, exporter, False, export_batch)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning(message)


def _built_with(spec: ModelSpec) -> dict[str, str]:
    """The versions of the libraries a reference's graph comes from: torch (the exporter) and the model's library.

    A cached graph built with other versions is built again (timm redefines models between releases; exporters
    change what they emit). An ONNX file is read as it is: nothing. Zoo models are this package's code, whose
    changes to a graph bump ``IR_VERSION``.
    """
    if spec.input_kind == "onnx":
        return {}
    lib = {"timm": "timm", "torchvision": "torchvision", "hf": "transformers"}.get(spec.ref.split(":")[0])
    return library_versions(("torch", lib) if lib else ("torch",))


def library_versions(
    libs: tuple[str, ...] = ("torch", "timm", "torchvision", "transformers"),
) -> dict[str, str]:
    """The installed versions of ``libs`` (those not installed left out): what graphs are built with."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for lib in libs:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            continue
    return out


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:  # gone: the graph is stale
        return None


def _local_sources(spec: ModelSpec) -> dict[str, str]:
    """For ``path/to/file.py:factory``: the digests of the loaded modules in its folder (or below it) other than
    the file itself, the helpers it imports as a script would; their change makes its cached graph stale.

    Installed packages (``site-packages``, the Python installation) and gnnperf's own modules are left out, should
    the folder hold them.
    """
    text = spec.ref.rpartition(":")[0]
    if not text.endswith(".py"):
        return {}
    user_file = Path(text)
    folder, own = user_file.parent, Path(__file__).resolve().parents[1]
    out = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not name or not name.endswith(".py"):
            continue
        path = Path(name).resolve()
        if path == user_file or not path.is_relative_to(folder) or path.is_relative_to(own):
            continue
        if {"site-packages", "dist-packages"} & set(path.parts) or path.is_relative_to(Path(sys.base_prefix)):
            continue
        digest = _file_digest(path)
        if digest is not None:
            out[str(path)] = digest
    return dict(sorted(out.items()))


def _source_digest(spec: ModelSpec) -> str | None:
    """Digest of the user file a reference builds from (``ModelSpec.source_file``: an hf config, a factory's
    module), or None.

    Such a file can change under the same reference; ONNX files are keyed by their digest already, and timm,
    torchvision and hf references carry the library versions they were built with (:func:`_built_with`).
    """
    path = spec.source_file
    salt = f"hf-read-{HF_READ_VERSION}".encode() if spec.ref.startswith("hf:") else b""
    if path is None or not path.is_file():
        # an hf: model type (no file; its fields are in the reference) still changes with how gnnperf reads configs
        return hashlib.sha256(salt).hexdigest()[:16] if salt else None
    return hashlib.sha256(salt + path.read_bytes()).hexdigest()[:16]
