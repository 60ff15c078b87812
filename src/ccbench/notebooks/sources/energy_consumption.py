# %% [markdown]
# # Energy consumption by zip code
# Data: **generated** by this notebook: daily electricity consumption over several years for
# residential, commercial and industrial zip codes, driven by a seasonal temperature curve,
# weekly rhythm and noise. No real meter data. Written for ccbench: EDA, segmentation of zip
# codes by k-means on their consumption profiles, and prediction of the last year's consumption.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_absolute_percentage_error, silhouette_score
from sklearn.preprocessing import StandardScaler

ZIPS = {"quick": 80, "full": 2_000}[size]
YEARS = {"quick": 2, "full": 3}[size]
rng = np.random.default_rng(seed)

# %%
# generate: one row per zip code and day
days = pd.date_range("2019-01-01", periods=365 * YEARS, freq="D")
zip_codes = pd.DataFrame({"zip": np.arange(10_000, 10_000 + ZIPS),
                          "segment": rng.choice(["residential", "commercial", "industrial"], ZIPS, p=[0.6, 0.3, 0.1])})
base = zip_codes["segment"].map({"residential": 900, "commercial": 2500, "industrial": 6000}).to_numpy() * rng.lognormal(0, 0.3, ZIPS)
heating = zip_codes["segment"].map({"residential": 1.0, "commercial": 0.6, "industrial": 0.2}).to_numpy()
weekend_drop = zip_codes["segment"].map({"residential": -0.05, "commercial": 0.35, "industrial": 0.2}).to_numpy()
day_of_year = np.asarray(days.dayofyear)
temperature = 12 - 11 * np.cos(2 * np.pi * (day_of_year - 20) / 365) + rng.normal(0, 3, len(days))
weekend = np.asarray(days.weekday) >= 5
comfort = np.abs(temperature - 18)[None, :]
kwh = (base[:, None] * (1 + 0.03 * heating[:, None] * comfort) * (1 - weekend_drop[:, None] * weekend[None, :])
       * (1 + 0.02 * (np.asarray(days.year) - 2019))[None, :] * rng.lognormal(0, 0.08, (ZIPS, len(days))))
consumption = pd.DataFrame({
    "zip": np.repeat(zip_codes["zip"].to_numpy(), len(days)),
    "date": np.tile(days, ZIPS),
    "temperature": np.tile(temperature.round(1), ZIPS),
    "kwh": kwh.ravel().round(2),
})
consumption.to_csv("consumption.csv", index=False)

# %%
consumption = pd.read_csv("consumption.csv", parse_dates=["date"])
consumption.shape, consumption["kwh"].describe()

# %%
# EDA: monthly totals, weekday rhythm, temperature response
consumption["month"] = consumption["date"].dt.to_period("M")
consumption["weekday"] = consumption["date"].dt.weekday
monthly = consumption.groupby("month")["kwh"].sum()
weekday_profile = consumption.groupby("weekday")["kwh"].mean()
temperature_bins = consumption.groupby(pd.cut(consumption["temperature"], 10), observed=True)["kwh"].mean()
monthly.head(), weekday_profile, temperature_bins

# %%
# segmentation: each zip code's profile (level, seasonality, weekend ratio, temperature slope)
profile = consumption.assign(weekend=consumption["weekday"] >= 5, cold=consumption["temperature"] < 8).groupby("zip").apply(
    lambda g: pd.Series({
        "level": g["kwh"].mean(),
        "variation": g["kwh"].std() / g["kwh"].mean(),
        "weekend_ratio": g.loc[g["weekend"], "kwh"].mean() / g.loc[~g["weekend"], "kwh"].mean(),
        "cold_ratio": g.loc[g["cold"], "kwh"].mean() / g.loc[~g["cold"], "kwh"].mean(),
    }), include_groups=False)
scaled = StandardScaler().fit_transform(np.log(profile))
clusters = {k: KMeans(n_clusters=k, n_init=10, random_state=seed).fit(scaled) for k in range(2, 7)}
silhouettes = {k: silhouette_score(scaled, model.labels_) for k, model in clusters.items()}
best_k = max(silhouettes, key=silhouettes.get)
profile["cluster"] = clusters[best_k].labels_
silhouettes, pd.crosstab(profile["cluster"], zip_codes.set_index("zip")["segment"])

# %%
# prediction: train on the earlier years, predict the last one
data = consumption.merge(profile[["cluster", "level"]], left_on="zip", right_index=True)
data["day_of_year"] = data["date"].dt.dayofyear
data["year"] = data["date"].dt.year
data = data.sort_values(["zip", "date"])
data["lag_7"] = data.groupby("zip")["kwh"].shift(7)
data = data.dropna(subset=["lag_7"])
features = ["temperature", "weekday", "day_of_year", "cluster", "level", "lag_7"]
last_year = data["year"] == data["year"].max()
model = HistGradientBoostingRegressor(max_iter=200, random_state=seed)
model.fit(data.loc[~last_year, features], data.loc[~last_year, "kwh"])
error = mean_absolute_percentage_error(data.loc[last_year, "kwh"], model.predict(data.loc[last_year, features]))
assert error < 0.25, error
{"best_k": best_k, "mape_last_year": error}
