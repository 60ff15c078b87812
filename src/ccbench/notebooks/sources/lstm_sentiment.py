# %% [markdown]
# # LSTM sentiment classifier (PyTorch on the CPU)
# Data: a **generated** corpus of short reviews (positive or negative, with negations, so word
# order matters), built by this notebook from word lists; no real reviews. Written for ccbench:
# tokenising, padding, an embedding + LSTM classifier trained for a few epochs on the CPU.
# Needs the `ml` extra (PyTorch).

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
import torch
from torch import nn

DOCUMENTS = {"quick": 1_500, "full": 40_000}[size]
EPOCHS = {"quick": 2, "full": 4}[size]
MAX_LENGTH = 24
torch.manual_seed(seed)
rng = np.random.default_rng(seed)

# %%
POSITIVE = "good great excellent wonderful enjoyable fun brilliant moving superb charming".split()
NEGATIVE = "bad awful terrible boring dull weak poor clumsy tedious bland".split()
FILLER = "the film plot actors story music scenes ending director cast script it was and quite very".split()
label = rng.random(DOCUMENTS) < 0.5
negated = rng.random(DOCUMENTS) < 0.3

def review(i):
    words = list(rng.choice(FILLER, rng.integers(6, 18)))
    polar = POSITIVE if label[i] != negated[i] else NEGATIVE
    word = rng.choice(polar)
    words.insert(rng.integers(0, len(words) + 1), f"not {word}" if negated[i] else word)
    return " ".join(words)

reviews = pd.DataFrame({"text": [review(i) for i in range(DOCUMENTS)], "label": label.astype(int)})
reviews.to_csv("reviews.csv", index=False)

# %%
reviews = pd.read_csv("reviews.csv")
vocabulary = {word: index + 2 for index, word in enumerate(sorted({w for t in reviews["text"] for w in t.split()}))}
def encode(text):
    ids = [vocabulary.get(w, 1) for w in text.split()][:MAX_LENGTH]
    return ids + [0] * (MAX_LENGTH - len(ids))
tokens = torch.tensor(np.array([encode(t) for t in reviews["text"]]))
labels = torch.tensor(reviews["label"].to_numpy(), dtype=torch.float32)
split = int(0.8 * DOCUMENTS)
len(vocabulary), tokens.shape

# %%
class LSTMClassifier(nn.Module):
    def __init__(self, vocabulary_size, embedding=32, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocabulary_size, embedding, padding_idx=0)
        self.lstm = nn.LSTM(embedding, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, 1)

    def forward(self, x):
        output, _ = self.lstm(self.embed(x))
        return self.out(output.max(dim=1).values).squeeze(1)

model = LSTMClassifier(len(vocabulary) + 2)
optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_function = nn.BCEWithLogitsLoss()

# %%
history = []
for epoch in range(EPOCHS):
    model.train()
    order = torch.randperm(split)
    for start in range(0, split, 64):
        batch = order[start:start + 64]
        optimiser.zero_grad()
        loss = loss_function(model(tokens[batch]), labels[batch])
        loss.backward()
        optimiser.step()
    model.eval()
    with torch.no_grad():
        accuracy = ((model(tokens[split:]) > 0).float() == labels[split:]).float().mean().item()
    history.append({"epoch": epoch, "loss": loss.item(), "test_accuracy": accuracy})
history

# %%
assert history[-1]["test_accuracy"] > 0.6, history
history[-1]
