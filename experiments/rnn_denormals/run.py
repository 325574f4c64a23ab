"""Why long-sequence LSTM/GRU rows of the CPU data are slow: subnormal gradients in the backward pass.

Four views, written to one JSON file:

1. ``per_flop``: the measured training step per forward GMAC (the zoo family's own count) of every LSTM/GRU row of
   a store, by cell, device and sequence length (median and row count);
2. ``subnormal``: for each cell, hidden size and sequence length, the harness's set-up (random init, ``torch.randn``
   input, cross-entropy on the last step, seed 0) run once forward and backward here: the share of the input's gradient
   that is subnormal or zero (the gradient enters at the last step and shrinks going back in time);
3. ``timed`` (with ``--time``): that step (SGD) timed here on one thread, median of 5 after a warm-up, with
   PyTorch's default and with ``torch.set_flush_denormal(True)``, which flushes subnormals to zero;
4. ``gnn`` (with ``--checkpoint``): measured / predicted (the network alone, no batch cap) of every one of those
   rows, by cell, sequence length and whether the checkpoint trained on the row (``train_sample_ids``).

    .venv/bin/python experiments/rnn_denormals/run.py --store datasets/cpu \\
        --checkpoint gnnperf/predictor/shipped/predictor.ckpt --time --out experiments/rnn_denormals/results.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from gnnperf.data.store import SampleStore
from gnnperf.errors import run_script
from gnnperf.hardware.probe import probe
from gnnperf.zoo.families import rnn
from gnnperf.zoo.resolve import zoo_params

CELLS = ("lstm", "gru")
SEQ_LENS = (16, 32, 64, 128, 256)
HIDDEN = (32, 128, 512)


def rnn_rows(store: Path) -> pd.DataFrame:
    """The store's measured LSTM/GRU rows with their cell, parameters and ms per forward GMAC."""
    df = SampleStore(store).read(status="ok")
    df = df[df["model_ref"].str.match(r"zoo:(lstm|gru)\?")].copy()
    df["cell"] = df["model_ref"].str.extract(r"zoo:(lstm|gru)\?", expand=False)
    params = df["model_ref"].map(lambda r: zoo_params(r)[1])
    df["seq_len"] = params.map(lambda p: p["seq_len"])
    gmacs = [rnn.macs(c, p) * b / 1e9 for c, p, b in zip(df["cell"], params, df["batch_size"])]
    df["ms_per_gmac"] = df["iteration_time_ms"] / np.asarray(gmacs)
    return df


def harness_setup(
    cell: str, seq_len: int, hidden: int = rnn.DEFAULTS["hidden_size"], batch: int = 8
) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """The family's default network at this length and width (weights from seed 0), a ``randn`` input, targets."""
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = rnn.build(cell, seq_len=seq_len, hidden_size=hidden)
    x = torch.randn((batch, seq_len, rnn.DEFAULTS["input_size"]), generator=gen)
    return model, x, torch.randint(0, rnn.DEFAULTS["num_classes"], (batch,), generator=gen)


def subnormal_share(cell: str, seq_len: int, hidden: int) -> dict[str, float]:
    """One forward and backward at this length, as the harness runs it: how much of the input's gradient underflows."""
    model, x, target = harness_setup(cell, seq_len, hidden)
    x.requires_grad_(True)
    torch.nn.functional.cross_entropy(model(x), target).backward()
    g = x.grad.abs()
    tiny = torch.finfo(torch.float32).tiny
    return {
        "subnormal": round(((g > 0) & (g < tiny)).float().mean().item(), 4),
        "zero": round((g == 0).float().mean().item(), 4),
        "first_step_mean_abs": float(g[:, 0].mean()),
    }


def step_ms(cell: str, seq_len: int, flush: bool, reps: int = 5) -> float:
    """Median training step (forward, loss, backward, SGD) of the family's default network, one thread."""
    torch.set_num_threads(1)
    torch.set_flush_denormal(flush)
    try:
        model, x, target = harness_setup(cell, seq_len)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        times = []
        for _ in range(reps + 1):
            start = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), target).backward()
            opt.step()
            times.append((time.perf_counter() - start) * 1e3)
        return round(float(np.median(times[1:])), 2)
    finally:
        torch.set_flush_denormal(False)


def network_fit(rows: pd.DataFrame, checkpoint: Path) -> dict[str, list[dict]]:
    """Measured / predicted of every row by the checkpoint's network, split by whether it trained on the row."""
    from gnnperf.predict import Predictor, Query
    from gnnperf.predictor.checkpoint import read_checkpoint

    trained = set(read_checkpoint(checkpoint)["gnnperf"]["train_sample_ids"])
    queries = [
        Query(m, h, int(b), optimizer=o)
        for m, h, b, o in zip(rows["model_ref"], rows["hardware"], rows["batch_size"], rows["optimizer"])
    ]
    pred = Predictor.from_checkpoint(checkpoint).predict(queries, batch_cap=False)
    fit = rows.assign(
        ratio=rows["iteration_time_ms"].to_numpy() / np.array([r["iteration_time_ms"] for r in pred]),
        trained=rows["sample_id"].isin(trained).to_numpy(),
    )
    table = fit.groupby(["cell", "seq_len", "trained"])["ratio"].agg(["median", "min", "max", "count"])
    return {"by_seq_len": table.round(2).reset_index().to_dict(orient="records")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, default=Path("datasets/cpu"))
    ap.add_argument("--checkpoint", type=Path, help="a predictor checkpoint that lists its training rows")
    ap.add_argument("--time", action="store_true", help="time the steps on this machine")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = rnn_rows(args.store)
    per_flop = (
        rows.groupby(["cell", "hardware", "seq_len"])["ms_per_gmac"]
        .agg(["median", "count"])
        .round(2)
        .reset_index()
    )
    result = {
        "store": str(args.store),
        "rows": len(rows),
        "per_flop": per_flop.to_dict(orient="records"),
        "subnormal": {c: {h: {t: subnormal_share(c, t, h) for t in SEQ_LENS} for h in HIDDEN} for c in CELLS},
    }
    if args.time:
        result["timed"] = {
            "cpu": probe(device="cpu", threads=1).display_name,
            "ms": {
                c: {t: {"default": step_ms(c, t, False), "flush": step_ms(c, t, True)} for t in (128, 256)}
                for c in CELLS
            },
        }
    if args.checkpoint:
        result["gnn"] = {"checkpoint": str(args.checkpoint), **network_fit(rows, args.checkpoint)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(per_flop.pivot_table(index=["cell", "hardware"], columns="seq_len", values="median").to_string())
    for c in CELLS:
        for h, by_len in result["subnormal"][c].items():
            print(c, f"hidden {h}", {t: round(v["subnormal"] + v["zero"], 3) for t, v in by_len.items()})
    if "timed" in result:
        print(result["timed"])
    if "gnn" in result:
        print(pd.DataFrame(result["gnn"]["by_seq_len"]).to_string())


if __name__ == "__main__":
    run_script(main)
