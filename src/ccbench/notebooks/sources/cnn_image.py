# %% [markdown]
# # Small CNN image classifier (PyTorch on the CPU)
# Data: the real **scikit-learn digits** (1,797 handwritten 8x8 digits from the UCI ML
# repository, shipped inside scikit-learn), upscaled to X-ray-like single-channel images
# (64x64 at full size) with random shifts and noise to make more images. Written for ccbench:
# a small convolutional network trained for a few epochs on the CPU. Needs the `ml` extra.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

SIDE = {"quick": 32, "full": 64}[size]
COPIES = {"quick": 1, "full": 4}[size]
EPOCHS = {"quick": 1, "full": 4}[size]
torch.manual_seed(seed)
rng = np.random.default_rng(seed)

# %%
digits = load_digits()
images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
images = F.interpolate(images, size=(SIDE, SIDE), mode="bilinear", align_corners=False)
targets = torch.tensor(digits.target)
# augmentation: shifted, noisy copies (in a fixed order, from the seed)
augmented, augmented_targets = [images], [targets]
for _ in range(COPIES - 1):
    shift = [int(s) for s in rng.integers(-SIDE // 10, SIDE // 10 + 1, 2)]
    noise = torch.tensor(rng.normal(0, 0.05, images.shape), dtype=torch.float32)
    augmented.append(torch.roll(images, shifts=shift, dims=(2, 3)) + noise)
    augmented_targets.append(targets)
X = torch.cat(augmented)
y = torch.cat(augmented_targets)
np.save("images.npy", X.numpy())
X = torch.tensor(np.load("images.npy"))
order = torch.randperm(len(X))
split = int(0.8 * len(X))
train_index, test_index = order[:split], order[split:]
X.shape

# %%
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.classify = nn.Linear(32 * 16, 10)

    def forward(self, x):
        return self.classify(self.features(x).flatten(1))

model = SmallCNN()
optimiser = torch.optim.Adam(model.parameters(), lr=2e-3)

# %%
history = []
for epoch in range(EPOCHS):
    model.train()
    shuffled = train_index[torch.randperm(len(train_index))]
    for start in range(0, len(shuffled), 64):
        batch = shuffled[start:start + 64]
        optimiser.zero_grad()
        loss = F.cross_entropy(model(X[batch]), y[batch])
        loss.backward()
        optimiser.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model(X[test_index]).argmax(1) == y[test_index]).float().mean().item()
    history.append({"epoch": epoch, "loss": loss.item(), "test_accuracy": accuracy})
history

# %%
assert history[-1]["test_accuracy"] > 0.3, history
history[-1]
