/**
 * Output side: publishes `create` requests to the custom topic as CloudEvents 1.0, with the
 * topic's access key in `aeg-sas-key`. One event goes as `application/cloudevents+json`,
 * an array as one `application/cloudevents-batch+json` request (what the service expects of
 * topics with the CloudEvents input schema).
 */
import { CloudEvent, ValidationError, type CloudEventV1 } from 'cloudevents';
import { ApiError, badRequest } from '../../../http/errors.ts';
import type { BindingRequest, BindingResponse } from '../../types.ts';
import type { OutputSettings } from './metadata.ts';

export const DEFAULT_EVENT_TYPE = 'rt.bindings.eventrouter.create';
const SINGLE = 'application/cloudevents+json; charset=utf-8';
const BATCH = 'application/cloudevents-batch+json; charset=utf-8';
const REQUIRED = ['specversion', 'id', 'source', 'type'] as const;

export class TopicPublisher {
  private readonly settings: OutputSettings;
  private readonly source: string;
  private readonly bindingName: string;

  constructor(settings: OutputSettings, bindingName: string, source: string) {
    this.settings = settings;
    this.bindingName = bindingName;
    this.source = source;
  }

  async create(req: BindingRequest): Promise<BindingResponse> {
    const { events, batch } = toCloudEvents(req.data, req.metadata, this.source);
    const body = JSON.stringify(batch ? events : events[0]);
    let res: Response;
    try {
      res = await fetch(this.settings.topicEndpoint, {
        method: 'POST',
        headers: { 'aeg-sas-key': this.settings.accessKey, 'content-type': batch ? BATCH : SINGLE },
        body,
        signal: AbortSignal.timeout(this.settings.publishTimeoutMs),
      });
    } catch (e) {
      const err = e as Error;
      const why = err.name === 'TimeoutError' ? `no answer within ${this.settings.publishTimeoutMs} ms` : causeOf(err);
      throw this.fail(`publishing to ${this.topic()} failed: ${why}`, [{ topic: this.topic() }]);
    }
    const text = await res.text().catch(() => '');
    if (res.status < 200 || res.status >= 300) {
      const { code, message } = topicError(text);
      throw this.fail(`topic ${this.topic()} answered ${res.status}${code ? ` ${code}` : ''}: ${message || res.statusText || 'no message'}`, [
        { topic: this.topic(), topicStatus: res.status, ...(code ? { topicCode: code } : {}) },
      ]);
    }
    return { metadata: { 'event-count': String(events.length) } };
  }

  private topic(): string {
    // origin and path only: a query string could carry a SAS token
    return `${this.settings.topicEndpoint.origin}${this.settings.topicEndpoint.pathname}`;
  }

  private fail(message: string, details: unknown[]): ApiError {
    return new ApiError(500, 'ERR_INVOKE_OUTPUT_BINDING', `error invoking output binding "${this.bindingName}": ${message}`, details);
  }
}

/**
 * Turns request data into CloudEvents. An object carrying all required CloudEvent attributes
 * is sent as it is (after validation); anything else becomes the `data` of a new event.
 * A JSON array (or a string holding one) is a batch.
 */
export function toCloudEvents(data: unknown, metadata: Record<string, string>, source: string): { events: object[]; batch: boolean } {
  let value = data;
  let text = false;
  if (typeof value === 'string') {
    // bindings often carry JSON as a string: publish the JSON it holds, not a string of it
    const t = value.trimStart();
    let parsed: unknown;
    if (t.startsWith('{') || t.startsWith('[')) {
      try {
        parsed = JSON.parse(value);
      } catch {
        parsed = undefined;
      }
    }
    if (parsed !== undefined) value = parsed;
    else text = true;
  }
  if (Array.isArray(value)) {
    if (value.length === 0) throw badRequest('ERR_INVOKE_OUTPUT_BINDING', '"data" is an empty array: a batch needs at least one event');
    return { events: value.map((v, i) => oneEvent(v, false, metadata, source, `data[${i}]`)), batch: true };
  }
  return { events: [oneEvent(value, text, metadata, source, 'data')], batch: false };
}

function oneEvent(value: unknown, text: boolean, metadata: Record<string, string>, source: string, where: string): object {
  if (isCloudEventShaped(value)) {
    if (value.specversion !== '1.0') {
      throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `${where} is a CloudEvent of specversion "${String(value.specversion)}"; the topic takes 1.0`);
    }
    try {
      const event = new CloudEvent(value as Partial<CloudEventV1<unknown>>, true).toJSON() as Record<string, unknown>;
      // published as it is: the SDK fills in a `time` the caller did not send
      if (value.time === undefined) delete event.time;
      return event;
    } catch (e) {
      throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `${where} is not a valid CloudEvent: ${validationMessage(e)}`);
    }
  }
  const type = metadata.type ?? metadata.eventType ?? DEFAULT_EVENT_TYPE;
  if (type.trim() === '') throw badRequest('ERR_INVOKE_OUTPUT_BINDING', 'metadata "type" must not be empty');
  const attrs: Record<string, unknown> = { type, source, specversion: '1.0' };
  if (metadata.subject) attrs.subject = metadata.subject;
  if (value !== undefined && value !== null) {
    attrs.data = value;
    // bytes go out as data_base64: they are not JSON unless the caller says so
    const fallback = value instanceof Uint8Array ? 'application/octet-stream' : text ? 'text/plain' : 'application/json';
    attrs.datacontenttype = metadata.dataContentType ?? metadata.contentType ?? fallback;
  }
  try {
    return new CloudEvent(attrs, true).toJSON();
  } catch (e) {
    throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `cannot build a CloudEvent from ${where}: ${validationMessage(e)}`);
  }
}

function isCloudEventShaped(v: unknown): v is Record<string, unknown> & { specversion: unknown } {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return REQUIRED.every((k) => typeof o[k] === 'string' && o[k] !== '');
}

function validationMessage(e: unknown): string {
  if (e instanceof ValidationError) {
    const errs = (e.errors ?? []) as unknown[];
    const first = errs[0] as { instancePath?: string; message?: string } | string | undefined;
    const detail = typeof first === 'string' ? first : first ? `${first.instancePath ?? ''} ${first.message ?? ''}`.trim() : '';
    return [e.message, detail].filter(Boolean).join(': ').split('\n')[0];
  }
  return e instanceof Error ? e.message.split('\n')[0] : String(e);
}

/** The service answers errors as {"error": {"code", "message"}}. */
function topicError(text: string): { code?: string; message: string } {
  try {
    const j = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (j && typeof j === 'object' && j.error && typeof j.error === 'object') {
      return {
        code: typeof j.error.code === 'string' ? j.error.code : undefined,
        message: typeof j.error.message === 'string' ? j.error.message.slice(0, 1000) : '',
      };
    }
  } catch {
    // not JSON: use the text
  }
  return { message: text.slice(0, 1000).trim() };
}

function causeOf(e: Error): string {
  const c = (e as { cause?: { code?: string; message?: string } }).cause;
  return c?.code ? `${c.code} ${c.message ?? ''}`.trim() : e.message;
}
