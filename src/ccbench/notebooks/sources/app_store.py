# %% [markdown]
# # App-store analysis
# Data: **generated** by this notebook: a table shaped like a scrape of an app store (about
# 2.3 million apps at full size; name, category, rating, reviews, size, installs, price,
# content rating, genres, last update, Android version, all as the strings a scrape yields).
# No real apps. Written for ccbench: string cleaning, heavy pandas groupby and aggregation.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd

APPS = {"quick": 60_000, "full": 2_300_000}[size]
rng = np.random.default_rng(seed)
CATEGORIES = ["ART_AND_DESIGN", "AUTO_AND_VEHICLES", "BEAUTY", "BOOKS_AND_REFERENCE", "BUSINESS", "COMICS",
              "COMMUNICATION", "DATING", "EDUCATION", "ENTERTAINMENT", "EVENTS", "FINANCE", "FOOD_AND_DRINK",
              "HEALTH_AND_FITNESS", "HOUSE_AND_HOME", "LIBRARIES_AND_DEMO", "LIFESTYLE", "GAME", "FAMILY",
              "MEDICAL", "SOCIAL", "SHOPPING", "PHOTOGRAPHY", "SPORTS", "TRAVEL_AND_LOCAL", "TOOLS",
              "PERSONALIZATION", "PRODUCTIVITY", "PARENTING", "WEATHER", "VIDEO_PLAYERS", "NEWS_AND_MAGAZINES",
              "MAPS_AND_NAVIGATION"]
WORDS = np.array(["photo", "editor", "pro", "lite", "free", "smart", "quick", "music", "player", "chat",
                  "fit", "daily", "simple", "super", "map", "go", "news", "cam", "keyboard", "vpn", "puzzle",
                  "math", "kids", "recipe", "wallet", "scanner", "weather", "radio", "bible", "launcher"])

# %%
# generate the scraped table (every column as text, the way a scrape arrives)
category = rng.choice(CATEGORIES, APPS, p=np.r_[np.full(31, 0.8 / 31), [0.1, 0.1]])
names = (pd.Series(WORDS[rng.integers(0, len(WORDS), APPS)]).str.title() + " "
         + pd.Series(WORDS[rng.integers(0, len(WORDS), APPS)]) + " "
         + pd.Series(rng.integers(1, 999, APPS)).astype(str))
installs_levels = np.array([0, 1, 5, 10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 500_000,
                            1_000_000, 5_000_000, 10_000_000, 50_000_000, 100_000_000, 500_000_000, 1_000_000_000])
installs = installs_levels[np.clip(rng.poisson(7, APPS), 0, len(installs_levels) - 1)]
reviews = (installs * rng.beta(1, 30, APPS)).astype(np.int64)
rating = np.where(reviews > 0, np.clip(rng.normal(4.15, 0.5, APPS), 1, 5).round(1), np.nan)
size_mb = rng.lognormal(2.7, 1.0, APPS)
size_text = np.where(rng.random(APPS) < 0.12, "Varies with device",
                     np.where(size_mb < 1, (size_mb * 1024).round().astype(int).astype(str) + "k",
                              size_mb.round(1).astype(str) + "M"))
paid = rng.random(APPS) < 0.075
price = np.where(paid, "$" + np.round(rng.choice([0.99, 1.99, 2.99, 4.99, 9.99, 14.99, 29.99], APPS), 2).astype(str), "0")
updated = pd.Timestamp("2010-05-21") + pd.to_timedelta(rng.integers(0, 3000, APPS), unit="D")
apps = pd.DataFrame({
    "App": names, "Category": category, "Rating": rating, "Reviews": reviews.astype(str),
    "Size": size_text, "Installs": pd.Series(installs).map("{:,}+".format),
    "Type": np.where(paid, "Paid", "Free"), "Price": price,
    "Content Rating": rng.choice(["Everyone", "Teen", "Everyone 10+", "Mature 17+", "Adults only 18+"], APPS,
                                 p=[0.8, 0.11, 0.04, 0.0499, 0.0001]),
    "Genres": pd.Series(category).str.replace("_AND_", " & ").str.title()
              + np.where(rng.random(APPS) < 0.1, ";Education", ""),
    "Last Updated": updated.strftime("%B %d, %Y"),
    "Android Ver": rng.choice(["4.0.3 and up", "4.1 and up", "4.4 and up", "5.0 and up", "Varies with device"], APPS),
})
apps.to_csv("apps.csv", index=False)

# %%
apps = pd.read_csv("apps.csv")
apps.shape, apps.dtypes.value_counts()

# %%
# cleaning: the string columns to numbers and dates
apps["Reviews"] = pd.to_numeric(apps["Reviews"], errors="coerce")
apps["Installs"] = pd.to_numeric(apps["Installs"].str.replace(r"[+,]", "", regex=True))
apps["Price"] = pd.to_numeric(apps["Price"].str.lstrip("$"))
size_text = apps["Size"].where(apps["Size"] != "Varies with device")
apps["Size_MB"] = pd.to_numeric(size_text.str[:-1], errors="coerce") / np.where(size_text.str.endswith("k"), 1024, 1)
apps["Last Updated"] = pd.to_datetime(apps["Last Updated"], format="%B %d, %Y")
apps["Min Android"] = pd.to_numeric(apps["Android Ver"].str.extract(r"^(\d+\.\d+)")[0], errors="coerce")
apps["Primary Genre"] = apps["Genres"].str.split(";").str[0]
apps = apps.drop_duplicates(subset=["App", "Category"])
apps.describe()

# %%
# aggregation: categories by installs, ratings and price
by_category = apps.groupby("Category").agg(
    apps=("App", "size"), installs=("Installs", "sum"), median_rating=("Rating", "median"),
    mean_reviews=("Reviews", "mean"), paid_share=("Type", lambda s: (s == "Paid").mean()),
    median_size=("Size_MB", "median")).sort_values("installs", ascending=False)
by_category.head(10)

# %%
revenue = (apps[apps["Type"] == "Paid"].assign(revenue=lambda d: d["Price"] * d["Installs"])
           .groupby(["Category", "Content Rating"])["revenue"].sum().unstack(fill_value=0))
by_year = apps.groupby([apps["Last Updated"].dt.year, "Type"])["Rating"].agg(["mean", "count"]).unstack()
rating_bands = pd.crosstab(pd.cut(apps["Rating"], [1, 3, 4, 4.5, 5]), apps["Content Rating"], normalize="columns")
revenue.sum(axis=1).nlargest(5), by_year.tail(), rating_bands

# %%
# text: the most common words in the names of top-rated, much-installed apps, and name lengths
popular = apps[(apps["Rating"] >= 4.5) & (apps["Installs"] >= 1_000_000)]
words = popular["App"].str.lower().str.split().explode()
top_words = words[~words.str.isdigit()].value_counts().head(15)
name_length = apps.groupby("Category")["App"].apply(lambda s: s.str.len().mean()).sort_values()
assert len(top_words) > 0
top_words, name_length.tail(3)
