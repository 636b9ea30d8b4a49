-- Sends a pre-signed corpus with wrk (bench/lib/wrk.ts): each request exactly once, in order, on
-- one thread; after the corpus's last answer it stops and leaves a marker file, and the runner
-- ends wrk with SIGINT (wrk then reports at once). Requests are raw HTTP/1.1 text, read
-- from BENCH_CORPUS ("<bytes>\n<request>" records). Once the corpus is spent, a connection that
-- becomes free sends GET /bench-idle (an unmounted path, answered 404 without touching the
-- database); those answers are recognised by their body and not counted.
-- Writes "key value" lines to BENCH_OUT: answers by status, 2xx answers without a response
-- signature, idle requests, latency percentiles (µs) and the summary.

local reqs = {}
local n = 0
do
  local f = assert(io.open(os.getenv("BENCH_CORPUS"), "rb"))
  local data = f:read("*a")
  f:close()
  local pos = 1
  while pos <= #data do
    local nl = data:find("\n", pos, true)
    local len = tonumber(data:sub(pos, nl - 1))
    n = n + 1
    reqs[n] = data:sub(nl + 1, nl + len)
    pos = nl + 1 + len
  end
end

local idle = "GET /bench-idle HTTP/1.1\r\nHost: bench\r\n\r\n"
local sent = 0
local answered = 0
statuses = {}
unsigned2xx = 0

-- wrk calls request() once in this state before any connection sends, to count the requests a
-- call returns (pipelining): that probe gets the idle request, not a corpus item.
local probed = false

function request()
  if not probed then
    probed = true
    return idle
  end
  if sent < n then
    sent = sent + 1
    return reqs[sent]
  end
  return idle
end

function response(status, headers, body)
  if status == 404 and body and body:find("/bench-idle", 1, true) then
    return
  end
  answered = answered + 1
  statuses[status] = (statuses[status] or 0) + 1
  if status >= 200 and status < 300 and headers["X-SVC-Response-Sign"] == nil and headers["x-svc-response-sign"] == nil then
    unsigned2xx = unsigned2xx + 1
  end
  if answered >= n then
    -- wrk's main thread sleeps for -d regardless: the marker tells the runner to end it (SIGINT).
    local m = assert(io.open(os.getenv("BENCH_OUT") .. ".done", "w"))
    m:close()
    wrk.thread:stop()
  end
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("BENCH_OUT"), "w"))
  local t = threads[1]
  local st = t:get("statuses")
  for code, count in pairs(st) do
    out:write(string.format("status %d %d\n", code, count))
  end
  out:write(string.format("unsigned2xx %d\n", t:get("unsigned2xx")))
  out:write(string.format("duration_us %d\n", summary.duration))
  out:write(string.format("requests %d\n", summary.requests))
  out:write(string.format("errors_connect %d\nerrors_read %d\nerrors_write %d\nerrors_timeout %d\n",
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
  out:write(string.format("latency_mean %f\nlatency_max %d\n", latency.mean, latency.max))
  for _, p in ipairs({50, 90, 99, 99.9}) do
    out:write(string.format("latency_p%s %d\n", tostring(p), latency:percentile(p)))
  end
  out:close()
end
