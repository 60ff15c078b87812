"""The bundled notebook suite: names, seed-000 aliases, and resolving a name or a path to a file.

Each bundled notebook was written for ccbench (see docs/notebooks.md): it names its data's origin
in its first cell, is deterministic (seeded), and has a ``parameters`` cell with ``size``
("quick" for tests, "full" for the real plan). Their sources live in ``sources/`` as
percent-format scripts; ``python -m ccbench.notebooks.build`` regenerates the ``.ipynb`` files.
"""

from __future__ import annotations

from pathlib import Path

from ccbench.basics.errors import PlanError

NOTEBOOK_DIR = Path(__file__).resolve().parent
DATA_DIR = NOTEBOOK_DIR / "data"

#: bundled name -> one line on what it does (the plan `datascience` runs all of them)
BUNDLED: dict[str, str] = {
    "simple_prime": "SimplePrime: counts primes by trial division (seed 000's validation notebook)",
    "airline_delay": "nycflights13 flights: EDA, joins with weather/airports/planes, gradient-boosted delay regression",
    "movie_recommendation": "MovieLens ratings: popularity baseline, genre similarity, matrix factorisation",
    "credit_fraud": "credit-card fraud (generated, real shape): under/oversampling, LR, RF, GB, precision-recall",
    "app_store": "app-store table (generated, 2.3 M apps at full size): heavy groupby, strings, aggregation",
    "energy_consumption": "energy use by zip code (generated, multi-year): k-means segmentation, prediction",
    "ecommerce_purchase": "e-commerce sessions (generated): EDA and purchase classifiers",
    "text_sentiment": "text sentiment (generated corpus): TF-IDF with a linear model",
    "lstm_sentiment": "LSTM text classifier in PyTorch on the CPU (generated corpus; needs the ml extra)",
    "cnn_image": "small CNN image classifier in PyTorch on the CPU (scikit-learn digits upscaled; needs the ml extra)",
}

#: notebooks that need PyTorch (the `ml` extra)
NEEDS_TORCH = frozenset({"lstm_sentiment", "cnn_image"})

#: seed 000's notebook file names -> the bundled notebook that does the same kind of work
SEED_ALIASES: dict[str, str] = {
    "SimplePrime.ipynb": "simple_prime",
    "airline-delay-notebook.ipynb": "airline_delay",
    "getting-started-with-a-movie-recommendation-system.ipynb": "movie_recommendation",
    "credit-fraud-dealing-with-imbalanced-datasets.ipynb": "credit_fraud",
    # seed 000 dropped the PyCaret notebook as too noisy; the same task without PyCaret
    "creditcard-fraud-balance-is-key-feat-pycaret.ipynb": "credit_fraud",
    "google-play-store-analysis.ipynb": "app_store",
    "energy-eda-segmentation-and-prediction.ipynb": "energy_consumption",
    "e-commerce-eda-purchase-classification.ipynb": "ecommerce_purchase",
    "twitter-sentiment-analysis.ipynb": "text_sentiment",
    "lstm-sentiment-analysis-keras.ipynb": "lstm_sentiment",
    "pneumonia-detection-using-cnn-92-6-accuracy.ipynb": "cnn_image",
}


def bundled_path(name: str) -> Path:
    return NOTEBOOK_DIR / f"{name}.ipynb"


def bundled_name(name_or_path: str) -> str | None:
    """The bundled notebook a name or seed alias stands for, or None for a user's notebook."""
    text = str(name_or_path).strip()
    base = Path(text).name
    if base in SEED_ALIASES and not Path(text).exists():
        return SEED_ALIASES[base]
    stem = base[: -len(".ipynb")] if base.endswith(".ipynb") else base
    if text in (stem, f"{stem}.ipynb") and stem in BUNDLED:
        return stem
    return None


def resolve(name_or_path: str | Path) -> Path:
    """A bundled name (``airline_delay`` or ``airline_delay.ipynb``), a seed-000 file name, or a path.

    An existing file wins over a bundled name, so a user's own ``SimplePrime.ipynb`` in the
    working directory is run as it is. Raises PlanError naming what was looked for.
    """
    text = str(name_or_path).strip()
    if not text:
        raise PlanError("notebook: empty name; give a bundled name (see docs/notebooks.md) or a path to an .ipynb")
    path = Path(text).expanduser()
    if path.is_file():
        return path.resolve()
    name = bundled_name(text)
    if name is not None:
        return bundled_path(name)
    known = ", ".join(sorted(BUNDLED))
    raise PlanError(
        f"notebook {text!r}: no such file, and not a bundled notebook or seed-000 name "
        f"(bundled: {known}); give a path to an .ipynb or one of those names"
    )
