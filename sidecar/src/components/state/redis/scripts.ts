/**
 * Lua scripts of the Redis state store. An item is a hash {data, version} — the layout the
 * ecosystem's Redis state store uses, so data written by either is readable by the other —
 * plus `expires` (ms since epoch) when it has a TTL, so that one HMGET reads everything.
 * Scripts run atomically in Redis, which makes etag checks and transactions race-free
 * across any number of sidecars sharing the database.
 */

/**
 * KEYS[i]: the key of operation i. ARGV: five fields per operation — kind ('u' upsert,
 * 'd' delete), etag ('' = none), first-write ('1'/'0'), ttl seconds ('' = none), value.
 * Pass 1 checks every operation against the state the earlier ones leave (nothing is
 * written yet) and works out each upsert's new version; pass 2 writes. Returns 0, or the 1-based index of the operation that failed
 * its etag check (then nothing was written). The checks are the reference Redis store's
 * (common.ts REDIS_ETAG_RULES): a key with no version yet takes any etag, and first-write
 * guards writes only, not deletes.
 */
export const WRITE = `
local shadow = {}
local versions = {}
for i = 1, #KEYS do
  local b = (i - 1) * 5
  local k = KEYS[i]
  local cur = shadow[k]
  if cur == nil then cur = redis.call('HGET', k, 'version') end
  local etag = ARGV[b + 2]
  if etag ~= '' then
    if cur and cur ~= etag then return i end
  elseif ARGV[b + 1] == 'u' and ARGV[b + 3] == '1' and cur then
    return i
  end
  if ARGV[b + 1] == 'u' then
    shadow[k] = tostring((tonumber(cur) or 0) + 1)
    versions[i] = shadow[k]
  else
    shadow[k] = false
  end
end
for i = 1, #KEYS do
  local b = (i - 1) * 5
  local k = KEYS[i]
  if ARGV[b + 1] == 'u' then
    redis.call('HSET', k, 'data', ARGV[b + 5], 'version', versions[i])
    local ttl = tonumber(ARGV[b + 4])
    if ttl and ttl > 0 then
      local t = redis.call('TIME')
      redis.call('HSET', k, 'expires', tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl * 1000))
      redis.call('EXPIRE', k, ttl)
    else
      redis.call('HDEL', k, 'expires')
      redis.call('PERSIST', k)
    end
  else
    redis.call('DEL', k)
  end
end
return 0
`;
