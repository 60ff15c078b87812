# %% [markdown]
# # Text sentiment: TF-IDF and a linear model
# Data: a **generated** corpus of short social-media style posts (positive or negative, with
# negations, intensifiers, hashtags, mentions and neutral filler), built by this notebook from
# word lists; no real posts. Written for ccbench: cleaning, TF-IDF of word and character
# n-grams, logistic regression and a linear SVM, evaluated on a held-out split.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import re

import numpy as np
import pandas as pd
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, classification_report
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

POSTS = {"quick": 6_000, "full": 250_000}[size]
rng = np.random.default_rng(seed)

# %%
POSITIVE = "love great awesome happy excellent amazing good wonderful fantastic enjoyed best nice brilliant glad".split()
NEGATIVE = "hate awful terrible sad horrible bad worst boring angry disappointed poor broken annoying ugly".split()
NEUTRAL = ("the a this that my your our movie phone flight service food weather game update day team show "
           "coffee app store weekend morning train song book price").split()
SUBJECTS = "i we they my friend everyone honestly today".split()
negate = rng.random(POSTS) < 0.15
label = rng.random(POSTS) < 0.5
words_in_post = rng.integers(5, 20, POSTS)

def post(i):
    polar = POSITIVE if label[i] != negate[i] else NEGATIVE
    words = list(rng.choice(NEUTRAL, words_in_post[i]))
    for _ in range(rng.integers(1, 3)):
        words.insert(rng.integers(0, len(words) + 1), ("not " if negate[i] else rng.choice(["", "so ", "really "])) + rng.choice(polar))
    if rng.random() < 0.2:  # a word of the other polarity, as real posts have
        words.insert(rng.integers(0, len(words) + 1), rng.choice(NEGATIVE if polar is POSITIVE else POSITIVE))
    text = rng.choice(SUBJECTS) + " " + " ".join(words)
    if rng.random() < 0.3:
        text = f"@user{rng.integers(1000)} " + text
    if rng.random() < 0.3:
        text += " #" + rng.choice(NEUTRAL)
    return text

corpus = pd.DataFrame({"text": [post(i) for i in range(POSTS)], "sentiment": np.where(label, "positive", "negative")})
corpus.to_csv("posts.csv", index=False)

# %%
corpus = pd.read_csv("posts.csv")
def clean(text):
    text = re.sub(r"@\w+", " ", text.lower())
    text = re.sub(r"#(\w+)", r"\1", text)
    return re.sub(r"[^a-z ]+", " ", text)
corpus["clean"] = corpus["text"].map(clean)
corpus["sentiment"].value_counts(), corpus["clean"].str.split().str.len().describe()

# %%
train, test = train_test_split(corpus, test_size=0.2, stratify=corpus["sentiment"], random_state=seed)
words = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
characters = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=3, sublinear_tf=True)
X_train = hstack([words.fit_transform(train["clean"]), characters.fit_transform(train["clean"])]).tocsr()
X_test = hstack([words.transform(test["clean"]), characters.transform(test["clean"])]).tocsr()
X_train.shape

# %%
models = {"logistic": LogisticRegression(max_iter=1000, C=2.0), "linear_svm": LinearSVC(C=0.5)}
accuracy = {}
for name, model in models.items():
    model.fit(X_train, train["sentiment"])
    accuracy[name] = accuracy_score(test["sentiment"], model.predict(X_test))
accuracy

# %%
# the strongest word features, and the report of the best model
coefficients = models["logistic"].coef_[0][: len(words.vocabulary_)]
vocabulary = np.array(words.get_feature_names_out())
strongest = {"positive": vocabulary[np.argsort(-coefficients)[:10]].tolist(),
             "negative": vocabulary[np.argsort(coefficients)[:10]].tolist()}
best = max(accuracy, key=accuracy.get)
assert accuracy[best] > 0.8, accuracy
print(classification_report(test["sentiment"], models[best].predict(X_test)))
strongest
