"""TorchLens's side of bench.py, in a process of its own (TorchLens refuses to capture in a
multiprocessing child, and once it has run it keeps torch's functions wrapped, which would slow
every later measurement of the main benchmark process).

Protocol: argv[1] is a model key of bench_models.MODELS. Prints "ready" (or "unavailable
REASON" and exits), then for each line "round" on stdin runs one capture of activations and
gradients and prints its duration in seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import MODELS, loss_of  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    try:
        import torchlens as tl
        from torchlens.options import CaptureOptions
    except Exception as exc:  # noqa: BLE001 - any import failure makes the column "n/a"
        print(f"unavailable torchlens: {exc}", flush=True)
        return
    model, x = MODELS[sys.argv[1]].build()

    def once() -> None:
        model.zero_grad(set_to_none=True)
        tr = tl.trace(model, x, capture=CaptureOptions(save_grads=True))
        tr.backward(loss_of(tr[tr.output_layers[0]].out))

    try:
        once()  # warm-up: TorchLens wraps torch's functions on its first call
    except Exception as exc:  # noqa: BLE001
        print(f"unavailable torchlens failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            break
        t0 = time.perf_counter()
        once()
        print(time.perf_counter() - t0, flush=True)


if __name__ == "__main__":
    main()
