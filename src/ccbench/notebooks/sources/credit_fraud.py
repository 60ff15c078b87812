# %% [markdown]
# # Credit-card fraud on imbalanced data
# Data: **generated** by this notebook with the shape of the public credit-card fraud data set
# (284,807 transactions, 30 numeric features `Time`, `V1`..`V28` (PCA-like components) and
# `Amount`, 0.17% fraud); no real transactions. Written for ccbench: random undersampling and
# oversampling (SMOTE-style interpolation), logistic regression, random forest and gradient
# boosting, evaluated by precision-recall.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, precision_recall_curve
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

ROWS = {"quick": 40_000, "full": 284_807}[size]
TREES = {"quick": 20, "full": 100}[size]
rng = np.random.default_rng(seed)

# %%
# generate the transactions: fraud differs from normal in a few components and in amount
fraud = rng.random(ROWS) < 0.00173
components = rng.normal(size=(ROWS, 28))
shift = np.zeros(28)
shift[[0, 2, 3, 9, 11, 13, 16]] = [-2.5, -3.0, 2.8, -2.2, -3.1, -3.6, -2.9]
components[fraud] = components[fraud] * 1.8 + shift
frame = pd.DataFrame(components, columns=[f"V{i}" for i in range(1, 29)])
frame.insert(0, "Time", np.sort(rng.uniform(0, 172_792, ROWS)).round())
frame["Amount"] = np.round(np.where(fraud, rng.gamma(0.6, 200, ROWS), rng.lognormal(3.0, 1.4, ROWS)), 2)
frame["Class"] = fraud.astype(int)
frame.to_csv("creditcard.csv", index=False)

# %%
data = pd.read_csv("creditcard.csv")
data["Class"].value_counts(), data.groupby("Class")["Amount"].describe()

# %%
X = data.drop(columns="Class")
X[["Time", "Amount"]] = StandardScaler().fit_transform(X[["Time", "Amount"]])
y = data["Class"].to_numpy()
X_train, X_test, y_train, y_test = train_test_split(X.to_numpy(), y, test_size=0.25, stratify=y, random_state=seed)

# %%
# random undersampling of the majority class to 1:1
positive = np.flatnonzero(y_train == 1)
negative = rng.choice(np.flatnonzero(y_train == 0), size=len(positive), replace=False)
under = np.concatenate([positive, negative])
X_under, y_under = X_train[under], y_train[under]

# %%
# oversampling: SMOTE-style, new positives interpolated between a positive and a near positive neighbour
def interpolate(points, count):
    distances = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(distances, np.inf)
    neighbours = np.argsort(distances, axis=1)[:, :5]
    base = rng.integers(0, len(points), count)
    partner = neighbours[base, rng.integers(0, neighbours.shape[1], count)]
    return points[base] + rng.random((count, 1)) * (points[partner] - points[base])

synthetic = interpolate(X_train[positive], int(0.1 * (y_train == 0).sum()) - len(positive))
X_over = np.vstack([X_train, synthetic])
y_over = np.concatenate([y_train, np.ones(len(synthetic), dtype=int)])
X_over.shape, y_over.mean()

# %%
models = {
    "logistic_balanced": (LogisticRegression(max_iter=1000, class_weight="balanced"), X_train, y_train),
    "logistic_undersampled": (LogisticRegression(max_iter=1000), X_under, y_under),
    "random_forest_oversampled": (RandomForestClassifier(n_estimators=TREES, max_depth=12, n_jobs=-1,
                                                         random_state=seed), X_over, y_over),
    "gradient_boosting_oversampled": (HistGradientBoostingClassifier(random_state=seed), X_over, y_over),
}
scores = {}
for name, (model, X_fit, y_fit) in models.items():
    model.fit(X_fit, y_fit)
    probability = model.predict_proba(X_test)[:, 1]
    precision, recall, _ = precision_recall_curve(y_test, probability)
    scores[name] = {"average_precision": average_precision_score(y_test, probability),
                    "recall_at_precision_0.8": float(recall[precision >= 0.8].max(initial=0.0))}
scores

# %%
assert max(s["average_precision"] for s in scores.values()) > 10 * y_test.mean(), scores
pd.DataFrame(scores).T.sort_values("average_precision", ascending=False)
