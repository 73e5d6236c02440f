#!/usr/bin/env bash
# The README's first ten minutes, as a new user runs them: a clean clone of this commit, the
# machine's own node (whatever /usr/bin/node is, 20 on our machines) first on PATH, then
#   npm install && npm start
# and the README's curl lines, down to the example workflow's output. Also checks that
# `npm test`'s runner and `npx rt` start on Node 24. Exits non-zero with what went wrong.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/rt-first-run.XXXXXX)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # npm can exit before the sidecar it started, which still writes its compile cache on the
    # way out: wait until the whole process group is gone (10 s), then make sure of it
    for _ in $(seq 1 100); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work"; }
}
trap cleanup EXIT
fail() {
  echo "first-run: $*" >&2
  [ -f "$work/start.log" ] && tail -40 "$work/start.log" >&2
  exit 1
}

git clone -q "$src" "$work/rt"
cd "$work/rt"
export PATH="/usr/bin:$PATH"
mkdir -p "$work/home" # npm start's data (~/.rt/data) goes here, not into the user's home
echo "first-run: node on PATH is $(node --version)"

npm install --no-audit --no-fund >"$work/install.log" 2>&1 || { tail -30 "$work/install.log"; fail "npm install failed"; }
npx rt --version | grep -q 'node v24\.' || fail "npx rt does not run on Node 24: $(npx rt --version 2>&1)"
npx vitest --version >/dev/null || fail "npx vitest does not start"
npm exec --no -- node --version | grep -q '^v24\.' || fail "npm scripts do not get Node 24"

# the first command, as written (its own process group, so the stop reaches the app too)
set -m
HOME="$work/home" npm start >"$work/start.log" 2>&1 &
pid=$!
set +m
for _ in $(seq 1 120); do
  curl -sf localhost:3500/v1.0/healthz >/dev/null 2>&1 && grep -q 'workflow worker ready' "$work/start.log" && break
  kill -0 "$pid" 2>/dev/null || fail "npm start exited"
  sleep 0.5
done
curl -sf localhost:3500/v1.0/healthz >/dev/null || fail "nothing serves on 3500"

expect() { # expect <what> <wanted substring> <curl args...>
  local what="$1" want="$2"
  shift 2
  local got
  got="$(curl -s "$@")" || fail "$what: curl failed"
  case "$got" in *"$want"*) echo "first-run: ok  $what" ;; *) fail "$what: wanted $want, got $got" ;; esac
}
expect metadata '"id":"example"' localhost:3500/v1.0/metadata
expect 'metadata attribute' '204' -o /dev/null -w '%{http_code}' -X PUT localhost:3500/v1.0/metadata/owner -H 'content-type: text/plain' -d 'me'
expect 'state save' '204' -o /dev/null -w '%{http_code}' -X POST localhost:3500/v1.0/state/statestore -H 'content-type: application/json' -d '[{"key":"k","value":{"a":1}}]'
expect 'state get' '{"a":1}' localhost:3500/v1.0/state/statestore/k
expect 'job' '204' -o /dev/null -w '%{http_code}' -X POST localhost:3500/v1.0-alpha1/jobs/hello -H 'content-type: application/json' -d '{"dueTime":"2s","data":{"msg":"hi"}}'
expect 'workflow start' '{"instanceID":"w1"}' -X POST 'localhost:3500/v1.0/workflows/rt/greet/start?instanceID=w1' -d '"rt"'
for _ in $(seq 1 40); do
  curl -s localhost:3500/v1.0/workflows/rt/w1 | grep -q COMPLETED && grep -q 'job hello fired' "$work/start.log" && break
  sleep 0.25
done
expect 'workflow output' '"runtimeStatus":"COMPLETED"' localhost:3500/v1.0/workflows/rt/w1
expect 'workflow output' 'Hello, rt!' localhost:3500/v1.0/workflows/rt/w1
grep -q '\[app\] job hello fired with data {"msg":"hi"}' "$work/start.log" || fail "the job did not reach the app"
if grep -q '^{' "$work/start.log"; then fail "npm start printed JSON log lines on a terminal"; fi
echo "first-run: the README's commands work from a clean clone with $(/usr/bin/node --version) first on PATH"
