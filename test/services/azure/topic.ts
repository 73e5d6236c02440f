/**
 * Loopback stand-in for a custom topic's publish endpoint (CloudEvents input schema):
 *   POST /api/events   header aeg-sas-key, body one CloudEvent (application/cloudevents+json)
 *                      or a batch (application/cloudevents-batch+json) → 200 with an empty body.
 * Errors are answered as the service does: {"error": {"code", "message"}}.
 */
import { timingSafeEqual } from 'node:crypto';
import type { TestCa } from '../ca.ts';
import { json, startHttps } from './https.ts';

export interface TopicStandIn {
  /** The topic endpoint: https://127.0.0.1:<port>/api/events */
  endpoint: string;
  key: string;
  /** Accepted publishes: the content type and the events. */
  received: { contentType: string; events: Record<string, unknown>[] }[];
  /** Answer the next publishes with this error instead. */
  failWith?: { status: number; code: string; message: string };
  /** Do not answer at all (timeouts). */
  hang: boolean;
  close(): Promise<void>;
}

export async function startTopicStandIn(ca: TestCa, key = 'dGVzdC10b3BpYy1rZXk='): Promise<TopicStandIn> {
  const topic: TopicStandIn = { endpoint: '', key, received: [], hang: false, close: async () => undefined };
  const server = await startHttps(ca, (req, res, body) => {
    if (topic.hang) return; // never answers: the client's timeout must fire
    const u = new URL(req.url ?? '/', 'https://x');
    if (req.method !== 'POST' || u.pathname !== '/api/events') return json(res, 404, { error: { code: 'NotFound', message: 'The requested resource was not found.' } });
    const given = Buffer.from(String(req.headers['aeg-sas-key'] ?? ''));
    const want = Buffer.from(topic.key);
    if (given.length !== want.length || !timingSafeEqual(given, want)) {
      return json(res, 401, { error: { code: 'Unauthorized', message: `The request authorization key is not authorized for ${u.host}. This is due to the reason: Invalid key.` } });
    }
    if (topic.failWith) return json(res, topic.failWith.status, { error: { code: topic.failWith.code, message: topic.failWith.message } });
    const contentType = String(req.headers['content-type'] ?? '');
    const mime = contentType.split(';')[0].trim();
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch {
      return json(res, 400, { error: { code: 'BadRequest', message: 'The request body is not valid JSON.' } });
    }
    let events: unknown[];
    if (mime === 'application/cloudevents+json' && !Array.isArray(value)) events = [value];
    else if (mime === 'application/cloudevents-batch+json' && Array.isArray(value)) events = value;
    else return json(res, 400, { error: { code: 'BadRequest', message: `Unsupported content type ${contentType} for this body.` } });
    for (const ev of events) {
      const e = ev as Record<string, unknown>;
      for (const k of ['specversion', 'id', 'source', 'type']) {
        if (typeof e?.[k] !== 'string' || e[k] === '') return json(res, 400, { error: { code: 'BadRequest', message: `Required property '${k}' was not set.` } });
      }
    }
    topic.received.push({ contentType, events: events as Record<string, unknown>[] });
    res.writeHead(200, { 'content-length': 0 });
    res.end();
  });
  topic.endpoint = `${server.url}/api/events`;
  topic.close = () => server.close();
  return topic;
}
