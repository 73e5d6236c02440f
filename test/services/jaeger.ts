/**
 * A private Jaeger (v2, built from the Go module proxy: see jaeger/binary.ts) for the tracing
 * suites: each suite starts its own, so the traces one suite finds are its own. It takes OTLP
 * over gRPC and HTTP and Zipkin v2 over HTTP, and keeps spans in memory; its config travels in an environment variable
 * (the collector's env: provider), so it has no files and leaves no folder. It runs under
 * `setpriv --pdeathsig KILL`, so a test worker that dies without stop() takes it along.
 */
import { existsSync } from 'node:fs';
import { ensureJaeger } from './jaeger/binary.ts';
import { jaegerConfig, type JaegerPorts } from './jaeger/config.ts';
import { fetchTrace, fetchTraceIds, type JaegerSpan } from './jaeger/query.ts';
import { freePort, waitForPort } from './net.ts';
import { startServerProcess, type StartedServer } from './server-process.ts';

export type { JaegerSpan } from './jaeger/query.ts';
export { ensureJaeger, jaegerUnavailable, jaegerVersion } from './jaeger/binary.ts';

export interface Jaeger {
  /** "127.0.0.1:port", as an OTLP gRPC exporter takes it. */
  otlpGrpcEndpoint: string;
  /** "http://127.0.0.1:port" (the OTLP/HTTP path is /v1/traces below it). */
  otlpHttpEndpoint: string;
  /** "http://127.0.0.1:port/api/v2/spans": the Zipkin receiver, as spec.tracing.zipkin.endpointAddress takes it. */
  zipkinEndpoint: string;
  /** "http://127.0.0.1:port": the query API (/api/traces/<id>) and UI. */
  queryUrl: string;
  /** The spans Jaeger has of the trace now; [] when it has none. */
  getTrace(traceId: string): Promise<JaegerSpan[]>;
  /** Polls until the trace has at least `minSpans` spans (default timeout 10 s); throws with what it saw. */
  waitForTrace(traceId: string, minSpans: number, timeoutMs?: number): Promise<JaegerSpan[]>;
  /** The ids of the traces with a span from `service`. */
  findTraces(service: string): Promise<string[]>;
  /** Ends Jaeger (its spans go with it). */
  stop(): Promise<void>;
}

const SETPRIV = '/usr/bin/setpriv';
const CONFIG_ENV = 'RT_JAEGER_CONFIG';

async function launch(bin: string): Promise<{ server: StartedServer; ports: JaegerPorts }> {
  const ports: JaegerPorts = { otlpGrpc: await freePort(), otlpHttp: await freePort(), queryHttp: await freePort(), queryGrpc: await freePort(), zipkin: await freePort() };
  const args = [`--config=env:${CONFIG_ENV}`];
  const server = await startServerProcess({
    name: 'jaeger',
    command: existsSync(SETPRIV) ? SETPRIV : bin,
    args: existsSync(SETPRIV) ? ['--pdeathsig', 'KILL', '--', bin, ...args] : args,
    // the receivers start last (extensions, then exporters, then receivers): once OTLP/HTTP
    // accepts, the query API and storage are up too
    port: ports.otlpHttp,
    url: `http://127.0.0.1:${ports.otlpHttp}`,
    dirs: [],
    spawnOptions: { env: { ...process.env, [CONFIG_ENV]: jaegerConfig(ports) } },
  });
  try {
    await Promise.all([waitForPort('127.0.0.1', ports.otlpGrpc, 5000), waitForPort('127.0.0.1', ports.queryHttp, 5000), waitForPort('127.0.0.1', ports.zipkin, 5000)]);
  } catch (e) {
    await server.stop();
    throw e;
  }
  return { server, ports };
}

/**
 * Starts a Jaeger on free loopback ports, building it first when the cache has none (the vitest
 * global setup builds it before any suite runs, so this is quick there). Throws with Jaeger's own
 * words when it cannot start; the caller decides whether that fails the suite (requireService).
 */
export async function startJaeger(): Promise<Jaeger> {
  const bin = await ensureJaeger();
  let started: Awaited<ReturnType<typeof launch>> | undefined;
  for (let attempt = 1; !started; attempt++) {
    try {
      started = await launch(bin);
    } catch (e) {
      // a free-chosen port taken by someone else in between: choose again
      if (attempt >= 3 || !/address already in use/i.test((e as Error).message)) throw e;
    }
  }
  const { server, ports } = started;
  const queryUrl = `http://127.0.0.1:${ports.queryHttp}`;
  const getTrace = (traceId: string) => fetchTrace(queryUrl, traceId);
  return {
    otlpGrpcEndpoint: `127.0.0.1:${ports.otlpGrpc}`,
    otlpHttpEndpoint: `http://127.0.0.1:${ports.otlpHttp}`,
    zipkinEndpoint: `http://127.0.0.1:${ports.zipkin}/api/v2/spans`,
    queryUrl,
    getTrace,
    async waitForTrace(traceId, minSpans, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      let spans: JaegerSpan[] = [];
      for (;;) {
        spans = await getTrace(traceId);
        if (spans.length >= minSpans) return spans;
        if (Date.now() >= deadline) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const seen = spans.map((s) => `${s.serviceName}/${s.operationName}`).join(', ') || 'none';
      throw new Error(`Jaeger has ${spans.length} span(s) of trace ${traceId} after ${timeoutMs} ms, wanted ${minSpans}: ${seen}`);
    },
    findTraces: (service) => fetchTraceIds(queryUrl, service),
    stop: () => server.stop(),
  };
}
