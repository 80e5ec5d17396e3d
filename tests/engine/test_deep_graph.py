"""A capture of a very long chain of ops ends with the process alive (issue 32's segfault).

PyTorch (2.13) frees an autograd node whose Python object was ever made (every node
gradtrace names) through that object, recursively down a chain: freed oldest node first, as
the capture's dicts would, a 50,000-op chain overflowed the main thread's C stack when the
capture's objects were let go, and the process died with a segfault. The chain is traced
here in a thread with a 1 MB stack, where 10,000 ops crashed the same way (checked before
the fix), so that the check stays short; ``faulthandler`` prints the stack if it crashes
again. The main thread's 8 MB at 50,000 ops with five hooks an op is what
tests/reliability/test_viewer_big.py traces (``make reliability``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import faulthandler, sys, threading
    faulthandler.enable()
    import torch
    from torch import nn
    import gradtrace

    OPS, HOOKS = 10_000, 1

    class Chain(nn.Module):
        def forward(self, x):
            for _ in range(OPS):
                x = x * 1.0001
                for _ in range(HOOKS):
                    x.register_hook(lambda g: g)
            return x

    def traced():
        return gradtrace.trace(Chain(), torch.ones(2, requires_grad=True), lambda out: out.sum(),
                               max_nodes=OPS + 10)

    def recorded():
        model, x = Chain(), torch.ones(2, requires_grad=True)
        with gradtrace.record(max_nodes=OPS + 10) as rec:
            model(x).sum().backward()
        return rec.trace

    counts = []
    def run():
        counts.append(len(traced().doc.graph.nodes))
        counts.append(len(recorded().doc.graph.nodes))

    threading.stack_size(2**20)
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    print(counts)
    """
)


def test_a_10000_op_chain_is_traced_and_recorded_on_a_1mb_stack_without_a_crash() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    # the whole chain, both ways: the leaf, its AccumulateGrad, the ops and the sum
    assert done.stdout.split() == ["[10003,", "10003]"]
