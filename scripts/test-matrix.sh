#!/usr/bin/env bash
# The test matrix `npm test` (and so .ci/run) runs, each run with the nats-server of its line
# (TOOLGATE_NATS_SERVER) under the node on PATH:
#   the current line (scripts/install-tools.sh) the whole suite
#   the previous line                           the execution, receipts, operations and quick fault slices
#   Debian's nats-server (2.9.10)               one-server development: the execution slice without the
#                                               replicated-storage tests (toolgate refuses R3 before 2.9.21)
#                                               and the orphaned-candidate test (made with a 2.10 consumer update)
# Each run prints `tests [<run>]: …`; the last line is the sum, `tests: N passed, N failed, N skipped`.
# One run alone: TOOLGATE_NATS_SERVER=/path/to/nats-server npm run test:suite [-- files]
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-tools.sh
eval "$(scripts/install-tools.sh --print)"

# better-sqlite3 is a native module built for the Node that installed it. `npm install` under one Node
# (or Debian's node-gyp, which builds against Debian's Node 20 headers) and `npm test` under another
# would fail every SQLite test with ERR_DLOPEN_FAILED: rebuild it once for the node on PATH, from that
# Node's own headers (no download), and say so.
if ! node -e "require('better-sqlite3')(':memory:').close()" 2>/dev/null; then
  node_prefix=$(node -p "require('path').resolve(process.execPath, '../..')")
  echo "test-matrix: better-sqlite3 was built for another Node; rebuilding it for node $(node --version) (headers: $node_prefix/include/node)"
  if [ -f "$node_prefix/include/node/node.h" ]; then
    npm_config_nodedir="$node_prefix" npm rebuild better-sqlite3 --loglevel=error >/dev/null
  else
    npm rebuild better-sqlite3 --loglevel=error >/dev/null
  fi
  node -e "require('better-sqlite3')(':memory:').close()" || {
    echo "test-matrix: better-sqlite3 does not load under node $(node --version): run 'npm_config_nodedir=<that node's install dir> npm rebuild better-sqlite3'" >&2
    exit 1
  }
fi

passed=0 failed=0 skipped=0
run() { # <label> <nats-server binary> [vitest arguments...]
  local label=$1 server=$2 started=$SECONDS
  shift 2
  if [ ! -x "$server" ]; then
    echo "test-matrix: no nats-server for '$label' (${server:-not on PATH}): run scripts/install-tools.sh; Debian's: apt-get install --no-install-recommends nats-server" >&2
    failed=$((failed + 1))
    return
  fi
  echo "== $label: $("$server" --version), node $(node --version): vitest run $*"
  local log
  log=$(mktemp)
  TOOLGATE_NATS_SERVER=$server TOOLGATE_TEST_RUN=$label TOOLGATE_TEST_DOCKER=0 npx vitest run "$@" 2>&1 | tee "$log"
  local counts
  counts=$(sed -n "s/^tests \[$label\]: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p" "$log" | tail -1)
  rm -f "$log"
  if [ -z "$counts" ]; then
    echo "test-matrix: '$label' ended without its summary line" >&2
    failed=$((failed + 1))
  else
    read -r p f s <<<"$counts"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  fi
  echo "== $label: $((SECONDS - started)) s"
}

run "nats $NATS_CURRENT" "$NATS_CURRENT_BIN"
run "nats $NATS_PREVIOUS" "$NATS_PREVIOUS_BIN" test/execution test/runner test/gateway/scaling.test.ts test/operations test/faults \
  test/security/nats-auth.test.ts test/cli/server-version.test.ts
run "nats debian" "$NATS_DEBIAN_BIN" test/execution test/security/nats-auth.test.ts test/cli/server-version.test.ts \
  --exclude test/execution/replicated-writes.test.ts --exclude test/execution/dispatch/orphaned-candidate.test.ts

echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
