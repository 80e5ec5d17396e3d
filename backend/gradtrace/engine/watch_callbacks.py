"""``gradtrace.watch`` where training loops already are: a Hugging Face ``Trainer`` callback
and a Lightning callback. Each opens a :class:`~gradtrace.engine.watch.Watch` on the model
when training begins and closes it when training ends (or fails): the watch itself is the
same as around a plain loop (a step is one backward pass through the model; the loss is
seen at its ``backward``; the update ratio around the optimizer's step, a closure's too).

The frameworks are imported when a callback is made, not with gradtrace (neither is a
dependency: ``pip install gradtrace[watch]`` does not bring them).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from gradtrace.engine.watch import Watch


class _Opened:
    """One watch opened by a callback: the options, then the open ``Watch``."""

    def __init__(self, path: Any, every: int, options: dict[str, Any]) -> None:
        self.path = path
        self.every = every
        self.options = options
        self.watch: Watch | None = None

    def open(self, model: nn.Module) -> None:
        if self.watch is not None:
            raise RuntimeError(f"gradtrace.watch: this callback already watches a run in {self.path}")
        self.watch = Watch(model, self.path, self.every, **self.options)
        self.watch.__enter__()

    def close(self, exc: BaseException | None = None) -> None:
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.__exit__(type(exc) if exc else None, exc, None)


class _Holder:
    """What both callbacks hold: ``opened``, and ``watch`` (the open Watch, None outside
    training)."""

    def __init__(self, opened: _Opened) -> None:
        self.opened = opened

    @property
    def watch(self) -> Watch | None:
        return self.opened.watch


def trainer_callback(path: Any, every: int, options: dict[str, Any]) -> Any:
    """A ``transformers.TrainerCallback`` that watches the Trainer's model."""
    from transformers import TrainerCallback

    class GradtraceWatchCallback(_Holder, TrainerCallback):
        """gradtrace.watch over ``Trainer.train()`` (see ``gradtrace.watch_trainer``)."""

        def on_train_begin(
            self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
        ) -> None:
            if model is None:
                raise ValueError("gradtrace.watch_trainer: the Trainer passed no model to on_train_begin")
            self.opened.open(model)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.opened.close()

    return GradtraceWatchCallback(_Opened(path, every, options))


def lightning_callback(path: Any, every: int, module: str | None, options: dict[str, Any]) -> Any:
    """A ``lightning.pytorch.Callback`` that watches the LightningModule (or its submodule
    ``module``, a dotted attribute path: the one whose forward the training step calls)."""
    try:
        from lightning.pytorch import Callback
    except ImportError:  # (the standalone package)
        from pytorch_lightning import Callback  # type: ignore[assignment]

    class GradtraceWatchCallback(_Holder, Callback):
        """gradtrace.watch over ``Trainer.fit()`` (see ``gradtrace.watch_lightning``)."""

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            model = pl_module
            for part in (module or "").split(".") if module else ():
                model = getattr(model, part)
            self.opened.open(model)

        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            self.opened.close()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.opened.close(exception)

    return GradtraceWatchCallback(_Opened(path, every, options))
