/**
 * Which headers cross a hop of service invocation. Hop-by-hop headers (RFC 9110 §7.6.1) and the
 * caller's own sidecar token never reach the target; everything else passes through as sent,
 * repeated headers included.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Header } from './proto.ts';

export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host', 'http2-settings']);
/** The app id the caller meant (a sidecar refuses a call for another app). */
export const TARGET = 'rt-invoke-target';
/** Who calls, as the calling sidecar states it (see Caller in proto/invoke.proto). */
export const CALLER_APP = 'rt-invoke-caller-app-id';
export const CALLER_NS = 'rt-invoke-caller-namespace';
export const CALLER_TD = 'rt-invoke-caller-trust-domain';
/** Headers of this hop only (all named rt-invoke-…): never taken from an app, never handed to one. */
export const isHopHeader = (name: string): boolean => name.startsWith('rt-invoke-');

/** The calling app's token for its own sidecar: the target gets its app token from its sidecar. */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'rt-api-token', 'dapr-api-token']);

/** Node's rawHeaders (name, value, name, value …) → headers to forward, without those `skip` names. */
export function requestHeaders(raw: string[], skip?: (name: string) => boolean): Header[] {
  const out: Header[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (!NOT_FORWARDED.has(name) && !skip?.(name)) out.push({ name, value: raw[i + 1] });
  }
  return out;
}

/** An app's answer headers (undici's object, arrays for repeats) → headers to send back. */
export function responseHeaders(h: IncomingHttpHeaders): Header[] {
  const out: Header[] = [];
  for (const [name, v] of Object.entries(h)) {
    if (v === undefined || HOP_BY_HOP.has(name)) continue;
    for (const value of Array.isArray(v) ? v : [v]) out.push({ name, value });
  }
  return out;
}

/** Header list → the object shape node/undici/fastify take (arrays for repeats), without those `skip` names. */
export function headerObject(list: Header[], skip?: (name: string) => boolean): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const { name, value } of list) {
    if (skip?.(name)) continue;
    const prev = out[name];
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

/**
 * The `type_url` of an InvokeService / OnInvoke `Any`, carried beside the body between a gRPC
 * caller, the sidecars and a gRPC app, so a protobuf message can be unpacked at the other end.
 */
export const DATA_TYPE_URL = 'rt-data-type-url';
