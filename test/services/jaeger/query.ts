/**
 * Reading a test Jaeger's query API (`/api/traces`, the JSON the Jaeger UI reads) into plain
 * spans. Ids come back as lowercase hex padded to OTel's widths (32 for a trace, 16 for a span):
 * Jaeger drops leading zeros, OTel and W3C traceparent keep them.
 */
export interface JaegerSpan {
  traceId: string;
  spanId: string;
  /** The span it is CHILD_OF, when it has one. */
  parentSpanId?: string;
  operationName: string;
  /** The emitting process's service.name. */
  serviceName: string;
  /** The `span.kind` tag: client, server, producer, consumer, internal. */
  kind?: string;
  /** All of the span's tags (attributes), by key. */
  tags: Record<string, unknown>;
  /** Its links (OTLP links are FOLLOWS_FROM references in Jaeger), as `<trace id>-<span id>`. */
  links?: string[];
}

export interface RawTag {
  key: string;
  value: unknown;
}
export interface RawSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: Array<{ refType: string; traceID: string; spanID: string }>;
  tags?: RawTag[];
  processID: string;
}
/** One trace as the query API's JSON has it. */
export interface RawTrace {
  traceID: string;
  spans: RawSpan[];
  processes: Record<string, { serviceName: string }>;
}
interface RawAnswer {
  data?: RawTrace[] | null;
  errors?: Array<{ code?: number; msg?: string }> | null;
}

const hex = (id: string, width: number) => id.toLowerCase().padStart(width, '0');
export const normalTraceId = (id: string) => hex(id, 32);

function toSpan(trace: RawTrace, s: RawSpan): JaegerSpan {
  const tags: Record<string, unknown> = {};
  for (const t of s.tags ?? []) tags[t.key] = t.value;
  const parent = s.references?.find((r) => r.refType === 'CHILD_OF');
  const links = (s.references ?? []).filter((r) => r.refType === 'FOLLOWS_FROM').map((r) => `${normalTraceId(r.traceID)}-${hex(r.spanID, 16)}`);
  return {
    traceId: normalTraceId(s.traceID),
    spanId: hex(s.spanID, 16),
    ...(parent ? { parentSpanId: hex(parent.spanID, 16) } : {}),
    operationName: s.operationName,
    serviceName: trace.processes[s.processID]?.serviceName ?? '',
    ...(typeof tags['span.kind'] === 'string' ? { kind: tags['span.kind'] } : {}),
    tags,
    ...(links.length > 0 ? { links } : {}),
  };
}

/** The spans of the query API's traces, as plain spans. */
export function spansOf(traces: RawTrace[]): JaegerSpan[] {
  return traces.flatMap((t) => t.spans.map((s) => toSpan(t, s)));
}

async function getJson(url: string): Promise<{ status: number; body: RawAnswer }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as RawAnswer };
  } catch {
    throw new Error(`Jaeger answered ${res.status} to ${url} with no JSON: ${text.slice(0, 200)}`);
  }
}

/** The spans of one trace; [] when Jaeger has none of it (its 404). */
export async function fetchTrace(queryUrl: string, traceId: string): Promise<JaegerSpan[]> {
  if (!/^[0-9a-fA-F]{1,32}$/.test(traceId)) throw new Error(`not a trace id: ${JSON.stringify(traceId)}`);
  const url = `${queryUrl}/api/traces/${normalTraceId(traceId)}`;
  const { status, body } = await getJson(url);
  if (status === 404) return [];
  if (status !== 200) throw new Error(`Jaeger answered ${status} to ${url}: ${JSON.stringify(body.errors ?? body)}`);
  return spansOf(body.data ?? []);
}

/** The ids of the traces with a span of `service` (Jaeger's default lookback, up to 1000). */
export async function fetchTraceIds(queryUrl: string, service: string): Promise<string[]> {
  const url = `${queryUrl}/api/traces?${new URLSearchParams({ service, limit: '1000' })}`;
  const { status, body } = await getJson(url);
  if (status !== 200) throw new Error(`Jaeger answered ${status} to ${url}: ${JSON.stringify(body.errors ?? body)}`);
  return [...new Set((body.data ?? []).map((t) => normalTraceId(t.traceID)))];
}
