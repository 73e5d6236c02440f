/** Resource shapes the sidecar reads (Component, Configuration, Subscription, HTTPEndpoint, Resiliency). */
import type { ComponentSpec } from '../components/types.ts';
import type { ResiliencySpec } from '../resiliency/spec.ts';

export interface FeatureFlag {
  name: string;
  enabled: boolean;
}

export interface ConfigurationResource {
  name: string;
  features: FeatureFlag[];
  /** The whole spec, for building blocks that read more of it. */
  spec: Record<string, unknown>;
}

export interface SubscriptionRule {
  match: string;
  path: string;
}

export interface SubscriptionInfo {
  pubsubname: string;
  topic: string;
  metadata: Record<string, string>;
  rules: SubscriptionRule[];
  deadLetterTopic: string;
  type: 'DECLARATIVE' | 'STREAMING' | 'PROGRAMMATIC';
  /** Deliver to the app in batches (pubsub/bulk.ts); absent or not enabled: one at a time. */
  bulkSubscribe?: BulkSubscribe;
}

export interface BulkSubscribe {
  enabled: boolean;
  /** most messages in one batch; default 100. */
  maxMessagesCount?: number;
  /** longest a message waits for its batch to fill; default 1000 ms. */
  maxAwaitDurationMs?: number;
}

/** spec.bulkSubscribe of a Subscription (or the app's entry) as read; undefined when absent. */
export function parseBulkSubscribe(v: unknown, fail: (field: string, problem: string) => never): BulkSubscribe | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) return fail('spec.bulkSubscribe', 'must be a mapping {enabled, maxMessagesCount, maxAwaitDurationMs}');
  const o = v as Record<string, unknown>;
  const count = (k: string): number | undefined => {
    if (o[k] === undefined) return undefined;
    const n = Number(o[k]);
    if (!Number.isInteger(n) || n <= 0) fail(`spec.bulkSubscribe.${k}`, 'must be a positive whole number');
    return n;
  };
  return { enabled: o.enabled === true || o.enabled === 'true', maxMessagesCount: count('maxMessagesCount'), maxAwaitDurationMs: count('maxAwaitDurationMs') };
}

/** A value given inline or as a secret to look up in a secret store. */
export interface ValueOrSecret {
  value?: string;
  secretKeyRef?: { name: string; key: string };
}

export interface HttpEndpointResource {
  name: string;
  baseUrl: string;
  headers: Record<string, string>;
  /** Headers whose value is a secret, looked up when a call is made. */
  secretHeaders?: { name: string; secretName: string; key: string }[];
  /** TLS toward the endpoint: PEM root CA, client certificate and key. */
  clientTLS?: { rootCA?: ValueOrSecret; certificate?: ValueOrSecret; privateKey?: ValueOrSecret };
  /** auth.secretStore, the store secretKeyRef values come from. */
  secretStore?: string;
}

/** A Component as read from a file, before secrets are resolved. */
export interface RawComponent {
  spec: ComponentSpec;
  /** metadata entries that still need a secret: metadata name → secret ref. */
  secretRefs: { field: string; secretName: string; key: string }[];
  /** auth.secretStore, the store secretKeyRef values come from. */
  secretStore?: string;
}

/** A Component the source did not send, and why (the operator found it invalid, or its Secrets unresolvable). */
export interface WithheldComponent {
  name: string;
  type: string;
  reason: string;
}

export interface Resources {
  components: RawComponent[];
  configuration?: ConfigurationResource;
  subscriptions: SubscriptionInfo[];
  httpEndpoints: HttpEndpointResource[];
  /** Components in scope that were not sent (operator source only); never loaded, reported instead. */
  withheld?: WithheldComponent[];
  /** Resiliency resources in scope, in the order read (a later one's policy of the same name wins). */
  resiliencies?: ResiliencySpec[];
}

/** A resource file or field is wrong: names the file, the resource and the field. */
export class ResourceError extends Error {
  readonly file: string;
  readonly resource?: string;
  readonly field?: string;
  constructor(file: string, resource: string | undefined, field: string | undefined, problem: string) {
    const where = [file, resource, field].filter(Boolean).join(': ');
    super(`${where}: ${problem}`);
    this.name = 'ResourceError';
    this.file = file;
    this.resource = resource;
    this.field = field;
  }
}
