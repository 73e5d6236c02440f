/**
 * Prometheus metrics on their own port (default 9090, `GET /metrics`), as users of sidecar
 * runtimes scrape them: the process's own (CPU, memory, event loop lag, GC) and the HTTP API's
 * request count and latency per route. prom-client does the bookkeeping and the text format.
 *
 * A port that is taken (two sidecars on one laptop) is not fatal: the sidecar logs it and runs
 * without metrics. `--disable-metrics` turns them off.
 */
import { createServer, type Server } from 'node:http';
import type { SidecarContext } from '../context.ts';
import { answerClientError } from '../http/client-error.ts';

export async function setup(ctx: SidecarContext): Promise<void> {
  const { options, log } = ctx;
  if (!options.enableMetrics) return;
  const { Registry, collectDefaultMetrics, Histogram, Gauge, Counter } = await import('prom-client');
  const registry = new Registry();
  registry.setDefaultLabels({ app_id: options.appId });
  collectDefaultMetrics({ register: registry, prefix: 'rt_' });
  const requests = new Histogram({
    name: 'rt_http_server_request_duration_seconds',
    help: 'Latency of the sidecar HTTP API, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const identity = ctx.identity;
  if (identity) {
    new Gauge({
      name: 'rt_identity_cert_expiry_seconds',
      help: "Seconds until the sidecar's workload certificate expires (notAfter); negative once expired, absent before the first",
      registers: [registry],
      collect() {
        const left = identity.secondsLeft();
        if (left === undefined) this.reset();
        else this.set(left);
      },
    });
  }
  // the resiliency block's counts, read at each scrape (that block may start after this one)
  new Counter({
    name: 'rt_resiliency_outcomes_total',
    help: 'Tries made under resiliency policies, by target (app:<id> or component:<name>/<direction>), policy and outcome (success, failure, retry, timeout, circuit-open)',
    labelNames: ['target', 'policy', 'outcome'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of ctx.services.resiliency?.outcomes() ?? []) this.inc({ target: c.target, policy: c.policy, outcome: c.outcome }, c.count);
    },
  });
  new Gauge({
    name: 'rt_resiliency_circuit_breaker_state',
    help: 'State of each circuit breaker in use: 0 closed, 1 half-open, 2 open',
    labelNames: ['target', 'policy'],
    registers: [registry],
    collect() {
      this.reset();
      for (const b of ctx.services.resiliency?.breakers() ?? []) this.set({ target: b.target, policy: b.policy }, b.state === 'closed' ? 0 : b.state === 'half-open' ? 1 : 2);
    },
  });
  ctx.http.addHook('onResponse', async (req, reply) => {
    // the route pattern (e.g. /v1.0/state/:storename), never the raw URL: keys must not become labels
    const route = req.routeOptions.url ?? 'unmatched';
    requests.observe({ method: req.method, route, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });

  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ errorCode: 'ERR_NOT_FOUND', message: 'metrics are served at GET /metrics', details: [] }));
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ errorCode: 'ERR_METRICS', message: e.message, details: [] })),
    );
  });
  server.on('clientError', answerClientError(log));
  const bound = await new Promise<boolean>((resolve) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      log.warn({ port: options.metricsPort, err: e.code ?? e.message }, `metrics port ${options.metricsPort} is not available: running without metrics (set --metrics-port)`);
      resolve(false);
    });
    server.listen(options.metricsPort, options.listenAddress, () => resolve(true));
  });
  if (!bound) return;
  ctx.metrics = { port: (server.address() as { port: number }).port };
  log.info({ port: ctx.metrics.port }, 'metrics on GET /metrics');
  ctx.onClose(() => new Promise<void>((resolve) => server.close(() => resolve())));
}
