-- made by ccbench: the microservices request mix for wrk
local ops = { {w=9, op="compose_post", path="/wrk2-api/post/compose?user_id=USER&text=[a-z]{32}"}, {w=1, op="follow", path="/wrk2-api/user/follow?user_id=USER&followee_id=USER"}, {w=60, op="home_timeline", path="/wrk2-api/home-timeline/read?user_id=USER&start=0&stop=10"}, {w=30, op="user_timeline", path="/wrk2-api/user-timeline/read?user_id=USER&start=0&stop=10"} }
local total = 0
for _, o in ipairs(ops) do total = total + o.w end
local users = 1000
local function fill(path)
  path = path:gsub("USER", function() return tostring(math.random(0, users - 1)) end)
  path = path:gsub("%[a%-z%]{32}", function()
    local t = {}
    for i = 1, 32 do t[i] = string.char(math.random(97, 122)) end
    return table.concat(t)
  end)
  return path
end
request = function()
  local r = math.random() * total
  for _, o in ipairs(ops) do
    r = r - o.w
    if r <= 0 then return wrk.format("GET", fill(o.path)) end
  end
  return wrk.format("GET", fill(ops[#ops].path))
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('CCBENCH {"requests": %d, "duration_us": %d, "connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d, "max": %d, "mean": %f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
