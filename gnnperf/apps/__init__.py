"""Thin Hydra entry points: each ``main()`` checks its command line, then Hydra runs ``run(cfg)``, which calls a
function that returns its results."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gnnperf.errors import GnnperfError, number, quiet_library_warnings

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from omegaconf import DictConfig

# The repository's conf/ (absolute: Hydra reads a relative path as a Python module under console scripts).
CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


@contextmanager
def user_errors(prog: str) -> Iterator[None]:
    """End a :class:`GnnperfError` in one line ``prog: error: ...`` and exit code 2; anything else still raises.

    Hydra's ``instantiate`` wraps what a target raises in an ``InstantiationException`` (a bad backbone name, a bad
    model size), so the chain of causes is searched too. The libraries' deprecation warnings are hidden.
    """
    quiet_library_warnings()
    try:
        yield
    except Exception as e:
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, GnnperfError):
            cause = cause.__cause__
        if cause is None:
            raise
        print(f"{prog}: error: {cause}", file=sys.stderr)
        sys.exit(2)


def check_command_line(
    prog: str,
    config_name: str,
    argv: Sequence[str] | None = None,
    check: Callable[[DictConfig], None] | None = None,
) -> None:
    """Compose the config a Hydra command line asks for before Hydra runs it.

    A mistake in it (an unknown group option such as ``model=foo``, a key the config does not have, an override
    that does not parse, ``logger=null``) ends in one line ``prog: error: ...`` and exit code 2, where Hydra prints
    several lines, or a traceback, and exits 1. In a sweep (``-m``) every listed value of a swept key is checked
    (with the other keys at their first value), so a bad one does not wait for the jobs before it. Hydra's own
    flags (``--help``, ``--info``...) are left to it. A value the config leaves to the command line (``???``,
    gnnperf-eval's ``checkpoint``) and that is not given is an error too. A composition takes a fraction of a second.
    ``check`` runs on every composed job config: the app's own checks that need no data (a fold past num_folds in a
    sweep's last job), raising :class:`GnnperfError`.
    """
    from hydra import compose, initialize_config_dir
    from hydra._internal.utils import get_args_parser  # Hydra's own command-line grammar; no public one
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    args, _ = get_args_parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.help or args.hydra_help or args.info or args.shell_completion or args.experimental_rerun:
        return
    if args.config_path or args.config_dir:  # another config tree than the one checked here
        return
    try:
        jobs = [list(args.overrides)]
        if args.multirun:
            values = [_values(o) for o in OverridesParser.create().parse_overrides(args.overrides)]
            first = [v[0] if v else "" for v in values]
            jobs = [first] + [first[:i] + [v] + first[i + 1 :] for i, vs in enumerate(values) for v in vs[1:]]
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name=prog):
            for job in jobs:
                cfg = compose(config_name=args.config_name or config_name, overrides=[o for o in job if o])
                missing = _missing_keys(OmegaConf.to_container(cfg, resolve=False))
                if missing:  # a value the config leaves to the command line (gnnperf-eval's checkpoint)
                    raise ValueError(f"{', '.join(missing)} must be given ({missing[0]}=...)")
                if check is not None:
                    check(cfg)
    except (HydraException, OmegaConfBaseException, ValueError, GnnperfError) as e:
        print(f"{prog}: error: {_one_line(e)}", file=sys.stderr)
        sys.exit(2)


def check_data_split(cfg: DictConfig) -> None:
    """The seed and the split of a train or eval config, as far as they can be checked without the data."""
    from gnnperf.data.splits import check_split_args

    number(cfg.seed, "seed")
    data = cfg.data
    kwargs = data.get("split_kwargs") or {}
    check_split_args(
        str(data.split), number(data.fold, "fold"), number(data.num_folds, "num_folds"), **kwargs
    )


def _missing_keys(node: object, prefix: str = "") -> list[str]:
    """Dotted keys whose value is ``???``, read without resolving interpolations (``${hydra:...}`` needs a run)."""
    if isinstance(node, dict):
        return [k for key, v in node.items() for k in _missing_keys(v, f"{prefix}{key}.")]
    return [prefix[:-1]] if node == "???" else []


def _values(override: Override) -> list[str]:
    """An override as the overrides of its sweep's values (``split.fold=0,1`` -> ``split.fold=0``, ``split.fold=1``);
    none where they cannot be listed without Hydra's config loader (glob sweeps) or are no list (intervals)."""
    if not override.is_sweep_override():
        return [override.input_line]
    from hydra.core.override_parser.types import ValueType

    if not override.is_discrete_sweep() or override.value_type == ValueType.GLOB_CHOICE_SWEEP:
        return []
    return [f"{override.get_key_element()}={v}" for v in override.sweep_string_iterator()]


def _one_line(error: BaseException) -> str:
    """Hydra's multi-line message on one line: its lines joined by '; ', an indented list after a line ending in
    ':' joined by ', ' (the options of a config group), the config search path left out, and of an OmegaConf
    cause its first line (``Key 'foo' is not in struct``)."""
    text = str(error).split("Config search path")[0]
    if error.__cause__ is not None and str(error.__cause__).strip():
        text += "\n" + str(error.__cause__).strip().splitlines()[0]
    parts: list[str] = []
    listing = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if listing and line[:1].isspace():
            parts[-1] += (" " if parts[-1].endswith(":") else ", ") + line.strip()
            continue
        listing = line.rstrip().endswith(":")
        parts.append(line.strip().rstrip("."))
    return "; ".join(parts)
