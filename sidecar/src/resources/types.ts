/** Resource shapes the sidecar reads (Component, Configuration, Subscription, HTTPEndpoint). */
import type { ComponentSpec } from '../components/types.ts';

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

export interface Resources {
  components: RawComponent[];
  configuration?: ConfigurationResource;
  subscriptions: SubscriptionInfo[];
  httpEndpoints: HttpEndpointResource[];
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
