-- wrk script for the bench: adds the Authorization header (never on the command line) and prints
-- one machine-readable line with the summary and latency percentiles.
--   BENCH_AUTH       one header value, sent with every request
--   BENCH_AUTH_FILE  a file of header values, one per line, sent in turn: with one thread (-t1), one
--                    round-robin over the whole list across all connections
--   BENCH_AUTH_START the 0-based line of BENCH_AUTH_FILE the first request carries (default 0), so that
--                    consecutive runs can carry on the same round-robin (bench/lib/load.mjs)
-- BENCH_AUTH_FILE wins when both are set.
--   BENCH_BODY, BENCH_CONTENT_TYPE: when BENCH_BODY is set, every request is a POST of it with that type
local body = os.getenv("BENCH_BODY")
if body ~= nil and #body > 0 then
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = os.getenv("BENCH_CONTENT_TYPE")
end
local auth = os.getenv("BENCH_AUTH")
local authFile = os.getenv("BENCH_AUTH_FILE")

if authFile ~= nil and #authFile > 0 then
  local values = {}
  for line in io.lines(authFile) do
    if #line > 0 then values[#values + 1] = line end
  end
  if #values == 0 then error("BENCH_AUTH_FILE " .. authFile .. " holds no value") end
  local prepared = {}
  -- n is the (1-based) index of the value sent last: start just before line BENCH_AUTH_START.
  local n = (tonumber(os.getenv("BENCH_AUTH_START") or "0") or 0) % #values

  -- wrk calls init() once per thread, after wrk.headers.Host is set: format every request once here,
  -- so request() costs one table read.
  function init(args)
    for i, value in ipairs(values) do
      wrk.headers["Authorization"] = value
      prepared[i] = wrk.format()
    end
    wrk.headers["Authorization"] = nil
  end

  function request()
    n = n % #prepared + 1
    return prepared[n]
  end
elseif auth ~= nil and #auth > 0 then
  wrk.headers["Authorization"] = auth
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
