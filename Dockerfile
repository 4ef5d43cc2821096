# syntax=docker/dockerfile:1
# The toolgate gateway: `toolgate serve` as a non-root process. Build where a Docker engine runs:
#   docker build -t toolgate:0.1.0 .                                   (the gateway: last stage)
#   docker build --target example-executor -t toolgate-example-executor:0.1.0 .
# The gateway needs a NATS JetStream server (NATS_URL); the image has no embedded nats-server.
# See docs/operations.md (environment, deployment) and deploy/ (compose, Kubernetes).

ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: all dependencies, native modules compiled, TypeScript compiled, then dev deps pruned
FROM ${NODE_IMAGE} AS build
WORKDIR /app
# better-sqlite3 and msgpackr-extract are native: compiled here when no prebuilt binary matches.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# --ignore-scripts: the package's own `prepare` (a build) needs src/, which comes later so that
# this layer is cached across source changes; the native modules' scripts are run by the rebuild.
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 msgpackr-extract
COPY tsconfig.json tsconfig.build.json tsconfig.examples.json ./
COPY src ./src
COPY examples ./examples
RUN npm run build \
 && npx tsc -p tsconfig.examples.json \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# ---- app: production node_modules (with their native builds), dist/, bin/, streams/, non-root
FROM ${NODE_IMAGE} AS app
ENV NODE_ENV=production \
    TOOLGATE_HTTP_HOST=0.0.0.0 \
    TOOLGATE_HTTP_PORT=8080 \
    TOOLGATE_DATA_DIR=/var/lib/toolgate
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY streams ./streams
RUN mkdir -p /var/lib/toolgate && chown 1000:1000 /var/lib/toolgate
# The image's `node` user, by number so Kubernetes' runAsNonRoot can verify it.
USER 1000:1000

# ---- example-executor: the ToolRunner example of examples/ (deploy/compose.yaml runs it)
FROM app AS example-executor
COPY --from=build /app/dist-examples ./dist-examples
ENV RUNNER_STORE=/var/lib/toolgate/tasks-executor.db
ENTRYPOINT ["node", "/app/dist-examples/examples/tasks-executor.js"]

# ---- runtime: the gateway. Last, so it is what a plain `docker build` produces.
FROM app AS runtime
EXPOSE 8080 9464
# No curl in the slim image: node's fetch asks /healthz on the configured port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.TOOLGATE_HTTP_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and receives SIGTERM itself (toolgate handles it: graceful stop).
ENTRYPOINT ["node", "/app/bin/toolgate.js"]
CMD ["serve"]
