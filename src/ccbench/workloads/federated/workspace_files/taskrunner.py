"""OpenFL task runner for ccbench's federations: a torchvision model, cross-entropy, Adam (seed 001)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from openfl.federated import PyTorchTaskRunner
from openfl.utilities import Metric
from src.ccfl_model import build_model


class CCBenchTaskRunner(PyTorchTaskRunner):
    def __init__(
        self,
        model_name="resnet18",
        num_classes=10,
        in_channels=1,
        learning_rate=1e-4,
        torch_threads=0,
        device="cpu",
        **kwargs,
    ):
        super().__init__(device=device, **kwargs)
        if torch_threads:
            # parties share the machine: each gets its share of the cores instead of all of them
            torch.set_num_threads(int(torch_threads))
        self.model = build_model(model_name, int(num_classes), int(in_channels))
        self.to(device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=float(learning_rate))
        self.loss_fn = F.cross_entropy

    def forward(self, x):
        return self.model(x)

    def train_(self, train_dataloader) -> Metric:
        self.model.train()
        total, batches = 0.0, 0
        for data, target in train_dataloader:
            data = torch.as_tensor(data).to(self.device)
            target = torch.as_tensor(target).long().to(self.device)
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.model(data), target)
            loss.backward()
            self.optimizer.step()
            total += loss.detach().item()
            batches += 1
        return Metric(name="crossentropy_loss", value=np.array(total / max(batches, 1)))

    def validate_(self, validation_dataloader) -> Metric:
        self.model.eval()
        correct, seen = 0, 0
        with torch.no_grad():
            for data, target in validation_dataloader:
                data = torch.as_tensor(data).to(self.device)
                target = torch.as_tensor(target).long().to(self.device)
                pred = self.model(data).argmax(dim=1)
                correct += int((pred == target).sum().item())
                seen += len(target)
        return Metric(name="accuracy", value=np.array(correct / max(seen, 1)))
