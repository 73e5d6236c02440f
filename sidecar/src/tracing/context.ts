/**
 * W3C trace context (https://www.w3.org/TR/trace-context/): `traceparent` read and written by hand,
 * so that the tracing-off path and the parsing of every incoming header need no OpenTelemetry
 * package. A header that is not a valid version-00 traceparent is treated as absent (a new trace),
 * never as an error of the call.
 */

export interface TraceParent {
  /** 32 lowercase hex, not all zeros. */
  traceId: string;
  /** 16 lowercase hex, not all zeros. */
  spanId: string;
  /** The trace-flags byte (bit 0: sampled). */
  flags: number;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The parsed header, or undefined when it is absent or not a valid version-00 traceparent. */
export function parseTraceParent(header: unknown): TraceParent | undefined {
  if (typeof header !== 'string' || header.length !== 55) return undefined;
  const m = TRACEPARENT.exec(header);
  if (!m || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return undefined;
  return { traceId: m[1], spanId: m[2], flags: parseInt(m[3], 16) };
}

export function formatTraceParent(p: TraceParent): string {
  return `00-${p.traceId}-${p.spanId}-${(p.flags & 0xff).toString(16).padStart(2, '0')}`;
}

export const isSampled = (p: TraceParent): boolean => (p.flags & 1) === 1;

/**
 * `tracestate` as given, when it is one printable header value within the spec's 512 characters
 * (a longer one may be cut by the spec; rt drops it rather than choosing members).
 */
export function keepTraceState(header: unknown): string | undefined {
  const v = Array.isArray(header) ? header.join(',') : header;
  if (typeof v !== 'string' || v === '' || v.length > 512 || !/^[\x20-\x7e]*$/.test(v)) return undefined;
  return v;
}

/** The first value of a header that node or grpc-js may give as a list. */
export function firstValue(v: unknown): unknown {
  return Array.isArray(v) ? v[0] : v;
}
