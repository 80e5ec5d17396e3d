"""gradtrace.watch where training loops already are: a Hugging Face Trainer callback and a
Lightning callback, on CPU, a few steps, nothing downloaded. The oracle: the same training
unwatched (weights bit-equal), and PyTorch's own hook after each parameter's gradient is
accumulated (``p.grad.norm()``, the recorded parameter gradient norms)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from watch_models import DeepMLP, gpt2_tiny

import gradtrace


def _grad_norms_by_backward(model: torch.nn.Module) -> list[dict[str, torch.Tensor]]:
    """After each backward: every parameter's ``p.grad.norm()`` (plain PyTorch hooks)."""
    seen: list[dict[str, torch.Tensor]] = []
    names = {id(p): n for n, p in model.named_parameters()}
    count = sum(p.requires_grad for p in model.parameters())

    def hook(p: torch.Tensor) -> None:
        if not seen or len(seen[-1]) == count:
            seen.append({})
        assert p.grad is not None
        seen[-1][names[id(p)]] = p.grad.norm()

    for p in model.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(hook)
    return seen


def _assert_recorded_as_plain_hooks(run: Any, oracle: list[dict[str, torch.Tensor]]) -> None:
    assert run.steps and all(s < len(oracle) for s in run.steps)
    for name in run.parameters:
        for step, got in zip(run.steps, run.grad_norm(name), strict=True):
            want = oracle[step][name]
            assert torch.tensor(got, dtype=want.dtype) == want, (name, step, got, want.item())


def _assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


class _Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, 100, (12,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def _hf_train(tmp_path: Path, callbacks: list[Any]) -> tuple[torch.nn.Module, list[dict[str, torch.Tensor]]]:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    torch.manual_seed(0)
    model = gpt2_tiny()
    oracle = _grad_norms_by_backward(model)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=2, report_to="none",
        use_cpu=True, save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=0,
    )  # fmt: skip
    transformers.Trainer(model=model, args=args, train_dataset=_Tokens(), callbacks=callbacks).train()
    return model, oracle


def test_a_hugging_face_trainer_callback_records_what_plain_hooks_see(tmp_path: Path) -> None:
    plain, _ = _hf_train(tmp_path / "plain", [])
    callback = gradtrace.watch_trainer(tmp_path / "run", every=2)
    watched, oracle = _hf_train(tmp_path / "watched", [callback])
    _assert_same_weights(plain, watched)  # training unchanged (AdamW, clipping, the LR schedule)
    assert callback.watch is None  # closed at on_train_end
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 2, 4] and len(oracle) == 6
    _assert_recorded_as_plain_hooks(run, oracle)
    assert all(isinstance(v, float) and math.isfinite(v) for v in run.loss)
    assert all(r is not None and r > 0 for r in run.update_ratio("transformer.h.0.mlp.c_fc.weight"))
    assert run.trace_steps[0] == "first logged step"
    assert any(n.key.startswith("transformer.h.1.attn") for n in run.nodes)  # the graph, keyed by module


def _lightning_fit(
    tmp_path: Path, callbacks: list[Any]
) -> tuple[torch.nn.Module, list[dict[str, torch.Tensor]]]:
    pl = pytest.importorskip("lightning.pytorch")

    class Lit(pl.LightningModule):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.net = DeepMLP(depth=3, residual_relu=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, index: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    torch.manual_seed(0)
    lit = Lit()
    oracle = _grad_norms_by_backward(lit)
    data = torch.utils.data.TensorDataset(torch.randn(48, 16), torch.randn(48, 1))
    trainer = pl.Trainer(
        max_steps=6, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks,
    )  # fmt: skip
    trainer.fit(lit, torch.utils.data.DataLoader(data, batch_size=8))
    return lit, oracle


def test_a_lightning_callback_records_what_plain_hooks_see(tmp_path: Path) -> None:
    plain, _ = _lightning_fit(tmp_path / "plain", [])
    callback = gradtrace.watch_lightning(tmp_path / "run", every=2)
    watched, oracle = _lightning_fit(tmp_path / "watched", [callback])
    _assert_same_weights(plain, watched)
    assert callback.watch is None  # closed at on_fit_end
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 2, 4] and len(oracle) == 6
    _assert_recorded_as_plain_hooks(run, oracle)
    # Lightning steps its optimizer with a closure (the forward and backward run inside the
    # step): the update ratio is still there
    assert all(r is not None and r > 0 for r in run.update_ratio("net.layers.0.weight"))
    assert "net.layers.0/AccumulateGrad#weight" in {n.key for n in run.nodes}
