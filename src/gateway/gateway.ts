import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import type { FastifyInstance } from "fastify";
import { ConfigStore } from "../config/config-store.js";
import { registerConsole } from "../console/static.js";
import { ContextWindows } from "../context/context-windows.js";
import { contextRoutes } from "../context/routes.js";
import { configRoutes } from "../config/routes.js";
import { coalesceWrites } from "../nats/coalesced-writes.js";
import { skipSettledRequestErrors } from "../nats/settled-requests.js";
import { ExecutorStore } from "../executors/executor-store.js";
import { executorRoutes } from "../executors/routes.js";
import { dryRunRoutes } from "../dryrun/route.js";
import { startExecution, type Execution, type ExecutionOptions } from "../execution/execution.js";
import { operationRoutes } from "../execution/http/operation-routes.js";
import { executionRoutes, runAgentScope } from "../execution/http/routes.js";
import { IdentityRegistry } from "../http/identities.js";
import { buildOpenApi } from "../http/openapi.js";
import { TokenBuckets } from "../http/rate-limit.js";
import { registerRoutes } from "../http/register.js";
import type { RouteDef } from "../http/route.js";
import { createHttpApp } from "../http/server.js";
import { systemRoutes, type Readiness } from "../http/system-routes.js";
import { createLogger, type Logger } from "../log/logger.js";
import { MCP_SERVER_VERSION, registerMcpEndpoint } from "../mcp-server/endpoint.js";
import { GatewayMetrics } from "../metrics/metrics.js";
import { startMetricsServer, type MetricsServer } from "../metrics/server.js";
import { natsConnectionOptions } from "../nats/connect.js";
import { bridgeExecutorJetStreamApi } from "../security/jsapi-bridge.js";
import { startEmbeddedNats, type EmbeddedNats } from "../nats/local-nats.js";
import { judgeEachReconnect, requireSupportedServer } from "../nats/server-version.js";
import { declaredStreamNames, definitionLabel, ensureStreams, inspectStreams, loadDefinitions, type Definition } from "../streams/index.js";
import { gatewayConfigFromEnv, type GatewayConfig } from "./config.js";
import { resolveIdentities } from "./identities-source.js";

/** What route factories get to build their routes on. */
export interface GatewayContext {
  nc: NatsConnection;
  store: ConfigStore;
  logger: Logger;
  config: GatewayConfig;
}

export interface GatewayOptions {
  /** Configuration; read from the environment when omitted. */
  config?: GatewayConfig;
  logger?: Logger;
  /** Further routes (e.g. the runtime API); they share auth, validation, errors and OpenAPI. */
  routes?: ((ctx: GatewayContext) => RouteDef[])[];
  /** Stream definitions; the package's `streams/` by default. */
  definitions?: Definition[];
  /** Execution path settings beyond the environment's (tests shorten the lease and the sweep interval). */
  execution?: Partial<ExecutionOptions>;
  /** The rate limiter's clock, `Date.now` by default (tests drive the refill instead of waiting for it). */
  rateLimitClock?: () => number;
}

export interface Gateway {
  app: FastifyInstance;
  nc: NatsConnection;
  store: ConfigStore;
  /** The executor registry; this process's view of it admits claims and heartbeats. */
  executors: ExecutorStore;
  /** This process's metrics (its own registry). */
  metrics: GatewayMetrics;
  /** The execution path: runs, tool calls, claims, receipts, history. */
  execution: Execution;
  /** Every route served, as declared (auth, schemas, OpenAPI). */
  routes: readonly RouteDef[];
  /** The embedded nats-server, when NATS_URL was not given. */
  embeddedNats?: EmbeddedNats;
  /** Starts listening on the configured host/port (and the metrics port, if set); resolves to the API's base URL. */
  listen(): Promise<string>;
  /** The separate metrics listener's URL, once listening with TOOLGATE_METRICS_PORT set. */
  readonly metricsUrl?: string;
  /** Graceful stop: HTTP first (in-flight requests finish), then NATS drained, then the child; logs flushed last. */
  close(): Promise<void>;
}

/**
 * Composes the service: NATS (given or embedded), streams applied, config store, HTTP routes.
 * Does not listen until `listen()`, so callers can add fastify plugins or use `app.inject`.
 */
export async function createGateway(options: GatewayOptions = {}): Promise<Gateway> {
  const config = options.config ?? gatewayConfigFromEnv();
  const logger = options.logger ?? createLogger({ level: config.LOG_LEVEL });
  const definitions = options.definitions ?? loadDefinitions();
  const identities = new IdentityRegistry(resolveIdentities(config, logger));

  const embeddedNats = config.NATS_URL ? undefined : await startEmbeddedNats(config.TOOLGATE_DATA_DIR, config.TOOLGATE_EMBEDDED_NATS_PORT, logger);
  // Everything started below is stopped again if the start fails, so a failed start leaves no child behind.
  const undoStart: (() => Promise<void>)[] = [];
  try {
    const nc = await connect(natsConnectionOptions({ ...config, NATS_URL: config.NATS_URL ?? embeddedNats!.server.url }, "gateway"));
    coalesceWrites(nc);
    skipSettledRequestErrors();
    const metrics = new GatewayMetrics();
    undoStart.unshift(() => nc.close());
    metrics.watchNats(nc);
    const replicas = { replicas: config.TOOLGATE_STREAM_REPLICAS };
    const server = requireSupportedServer(nc, replicas, (warning, facts) => logger.warn({ nats_server: facts.version }, warning));
    logger.info({ nats_server: server.version, server_name: server.serverName, cluster: server.cluster }, "connected to NATS");
    judgeEachReconnect(nc, replicas, logger);
    const jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, definitions, { replicas: config.TOOLGATE_STREAM_REPLICAS, progress: (line) => logger.info({ streams: line }, "streams") });
    const store = await ConfigStore.open(nc);
    const executors = await ExecutorStore.open(nc, store);
    // Claims and heartbeats are admitted by this view of the registry: it holds the registry before any responder subscribes.
    undoStart.unshift(async () => executors.stop());
    await executors.watch();
    const ctx: GatewayContext = { nc, store, logger, config };
    const execution = await startExecution({
      nc,
      config: store,
      registry: executors,
      definitions,
      log: logger,
      metrics,
      options: {
        leaseMs: config.TOOLGATE_CLAIM_LEASE_MS,
        replicas: config.TOOLGATE_STREAM_REPLICAS,
        maxClaimsPerExecutor: config.TOOLGATE_MAX_CLAIMS_PER_EXECUTOR,
        receiptConcurrency: config.TOOLGATE_RECEIPT_CONCURRENCY,
        storeLayout: config.TOOLGATE_STORE_LAYOUT,
        ...options.execution,
      },
    });
    undoStart.unshift(() => execution.stop());
    const contextWindows = await ContextWindows.open(nc, execution, store);
    bridgeExecutorJetStreamApi(nc); // ended by the drain on close

    const declaredStreams = declaredStreamNames(definitions);
    metrics.readJetStreamFrom(() => inspectStreams(jsm, declaredStreams));
    const readiness = async (): Promise<Readiness> => {
      const checks: Record<string, string> = { nats: nc.isClosed() ? "closed" : "connected" };
      for (const name of declaredStreams) {
        checks[`stream ${name}`] = await jsm.streams.info(name).then(
          () => "present",
          (err: Error) => `missing: ${err.message}`,
        );
      }
      return { ready: Object.values(checks).every((c) => c === "connected" || c === "present"), checks };
    };
    const routes: RouteDef[] = [];
    const openapi = buildOpenApiOnce(() => buildOpenApi(routes, { title: "toolgate", version: "1" }));
    routes.push(
      ...systemRoutes({ readiness, openapi }),
      ...configRoutes(store),
      ...executorRoutes(executors, execution.detach),
      ...dryRunRoutes(store),
      ...executionRoutes(execution, store),
      ...operationRoutes(execution),
      ...contextRoutes(contextWindows, runAgentScope(execution)),
      ...(options.routes ?? []).flatMap((f) => f(ctx)),
    );

    const app = createHttpApp({ logger, bodyLimit: config.TOOLGATE_HTTP_BODY_LIMIT, maxJsonDepth: config.TOOLGATE_JSON_MAX_DEPTH });
    metrics.instrumentHttp(app);
    const limits = new TokenBuckets(config.TOOLGATE_RATE_LIMIT_RPS, config.TOOLGATE_RATE_LIMIT_BURST, options.rateLimitClock);
    registerRoutes(app, routes, identities, limits);
    registerMcpEndpoint(app, { store, execution, log: logger, version: MCP_SERVER_VERSION }, config.TOOLGATE_MCP_MAX_SESSIONS, identities, limits);
    registerConsole(app);
    // Prometheus text, not a JSON API route: registered beside the declared routes, absent from OpenAPI.
    if (config.TOOLGATE_METRICS_PORT === undefined)
      app.get("/metrics", async (_req, reply) => {
        const { contentType, body } = await metrics.exposition();
        return reply.type(contentType).send(body);
      });
    logger.info({ identities: identities.size, routes: routes.length, declared: definitions.map(definitionLabel) }, "gateway ready to listen");

    let closed = false;
    let metricsServer: MetricsServer | undefined;
    return {
      app,
      nc,
      store,
      executors,
      metrics,
      execution,
      routes,
      embeddedNats,
      get metricsUrl() {
        return metricsServer && `http://${config.TOOLGATE_HTTP_HOST}:${metricsServer.port}`;
      },
      async listen() {
        if (config.TOOLGATE_METRICS_PORT !== undefined)
          metricsServer = await startMetricsServer(metrics, config.TOOLGATE_HTTP_HOST, config.TOOLGATE_METRICS_PORT);
        await app.listen({ host: config.TOOLGATE_HTTP_HOST, port: config.TOOLGATE_HTTP_PORT });
        const address = app.server.address();
        const port = typeof address === "object" && address ? address.port : config.TOOLGATE_HTTP_PORT;
        return `http://${config.TOOLGATE_HTTP_HOST}:${port}`;
      },
      async close() {
        if (closed) return;
        closed = true;
        await app.close();
        await metricsServer?.close();
        await execution.stop();
        executors.stop();
        if (!nc.isClosed()) await nc.drain();
        await embeddedNats?.stop();
        logger.info("gateway stopped");
        await new Promise<void>((done) => logger.flush(() => done()));
      },
    };
  } catch (err) {
    for (const undo of undoStart) await undo();
    await embeddedNats?.stop();
    throw err;
  }
}

/** The document is built on first request, once every route is registered. */
function buildOpenApiOnce(build: () => Record<string, unknown>): () => Record<string, unknown> {
  let doc: Record<string, unknown> | undefined;
  return () => (doc ??= build());
}
