# %% [markdown]
# # E-commerce: will the session end in a purchase?
# Data: **generated** by this notebook: web-shop sessions with page counts and durations per
# page type, bounce and exit rates, page value, special-day proximity, month, visitor type and
# weekend flag, with a purchase label (about 15% positives). No real shop's data. Written for
# ccbench: EDA and purchase classifiers (logistic regression, random forest, gradient boosting).

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

SESSIONS = {"quick": 15_000, "full": 400_000}[size]
TREES = {"quick": 20, "full": 100}[size]
rng = np.random.default_rng(seed)

# %%
# generate sessions: intent drives product pages, page value and the purchase
intent = rng.beta(1.2, 5, SESSIONS)
months = np.array(["Feb", "Mar", "May", "June", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"])
sessions = pd.DataFrame({
    "Administrative": rng.poisson(2 + 3 * intent),
    "Informational": rng.poisson(0.5 + intent),
    "ProductRelated": rng.poisson(10 + 60 * intent),
    "Month": rng.choice(months, SESSIONS, p=[0.015, 0.155, 0.273, 0.023, 0.035, 0.035, 0.036, 0.045, 0.243, 0.14]),
    "VisitorType": rng.choice(["Returning_Visitor", "New_Visitor", "Other"], SESSIONS, p=[0.855, 0.138, 0.007]),
    "Weekend": rng.random(SESSIONS) < 0.23,
    "SpecialDay": rng.choice([0, 0.2, 0.4, 0.6, 0.8, 1.0], SESSIONS, p=[0.9, 0.015, 0.02, 0.03, 0.025, 0.01]),
})
sessions["Administrative_Duration"] = sessions["Administrative"] * rng.gamma(2, 20, SESSIONS)
sessions["Informational_Duration"] = sessions["Informational"] * rng.gamma(2, 30, SESSIONS)
sessions["ProductRelated_Duration"] = sessions["ProductRelated"] * rng.gamma(2, 18 + 20 * intent)
sessions["BounceRates"] = np.clip(rng.beta(1, 30, SESSIONS) * (1.5 - intent), 0, 0.2)
sessions["ExitRates"] = np.clip(sessions["BounceRates"] + rng.beta(2, 40, SESSIONS), 0, 0.2)
sessions["PageValues"] = np.where(rng.random(SESSIONS) < intent * 1.5, rng.gamma(2, 15 + 30 * intent), 0.0)
logit = -3.2 + 6 * intent + 0.04 * sessions["PageValues"] + 0.8 * sessions["Month"].eq("Nov") - 10 * sessions["BounceRates"]
sessions["Revenue"] = rng.random(SESSIONS) < 1 / (1 + np.exp(-logit))
sessions.to_csv("sessions.csv", index=False)

# %%
sessions = pd.read_csv("sessions.csv")
sessions["Revenue"].mean(), sessions.describe().T[["mean", "50%", "max"]]

# %%
# EDA: conversion by month, visitor type and weekend; correlation with the label
conversion = {column: sessions.groupby(column)["Revenue"].agg(["mean", "size"])
              for column in ["Month", "VisitorType", "Weekend", "SpecialDay"]}
numeric = sessions.select_dtypes("number")
correlation = numeric.corrwith(sessions["Revenue"].astype(float)).sort_values(ascending=False)
conversion["Month"].sort_values("mean"), correlation.head()

# %%
categorical = ["Month", "VisitorType"]
numerical = [c for c in sessions.columns if c not in categorical + ["Revenue"]]
X = sessions.drop(columns="Revenue")
X["Weekend"] = X["Weekend"].astype(int)
y = sessions["Revenue"].astype(int)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
encode = ColumnTransformer([("categories", OneHotEncoder(handle_unknown="ignore"), categorical),
                            ("numbers", StandardScaler(), numerical)])

# %%
models = {
    "logistic": make_pipeline(encode, LogisticRegression(max_iter=1000, class_weight="balanced")),
    "random_forest": make_pipeline(encode, RandomForestClassifier(n_estimators=TREES, min_samples_leaf=5,
                                                                  n_jobs=-1, random_state=seed)),
    "gradient_boosting": make_pipeline(encode, HistGradientBoostingClassifier(random_state=seed)),
}
scores = {}
for name, model in models.items():
    model.fit(X_train, y_train)
    probability = model.predict_proba(X_test)[:, 1]
    scores[name] = {"roc_auc": roc_auc_score(y_test, probability), "f1": f1_score(y_test, probability > 0.5)}
assert max(s["roc_auc"] for s in scores.values()) > 0.75, scores
pd.DataFrame(scores).T
