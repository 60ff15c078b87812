"""OpenFL data loader for ccbench's federations: one collaborator's shard, written by ccbench beforehand.

``data_path`` (from plan/data.yaml) is the shard's .npz file with uint8 images (N, C, H, W) and
integer labels; pixels are scaled to [0, 1] floats once, at load.
"""

from __future__ import annotations

import numpy as np
from openfl.federated import PyTorchDataLoader


class CCBenchShardLoader(PyTorchDataLoader):
    def __init__(self, data_path=None, batch_size=32, feature_shape=(1, 28, 28), num_classes=10, **kwargs):
        super().__init__(batch_size, **kwargs)
        self.feature_shape = list(feature_shape)
        self.num_classes = int(num_classes)
        self.train_loader = None
        self.val_loader = None
        if data_path is None:  # model initialisation only (fx plan initialize)
            return
        with np.load(data_path) as shard:
            self.X_train = shard["x_train"].astype(np.float32) / 255.0
            self.y_train = shard["y_train"].astype(np.int64)
            self.X_valid = shard["x_valid"].astype(np.float32) / 255.0
            self.y_valid = shard["y_valid"].astype(np.int64)

    def get_feature_shape(self):
        return self.feature_shape

    def get_num_classes(self):
        return self.num_classes
