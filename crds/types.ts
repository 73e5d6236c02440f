/**
 * TypeScript shapes of the objects crds/*.yaml define, for the file loader, the operator and the
 * injector. Field names and optionality follow the CRD schemas; crds/validate.ts checks objects
 * against the schemas themselves (test/operator/crds.test.ts keeps the two in step).
 */

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

export interface ResourceStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface SecretKeyRef {
  name: string;
  key?: string;
}

export interface MetadataEntry {
  name: string;
  /** A string, or a whole number (the CRD keeps the YAML type so rules can see it). */
  value?: string | number;
  secretKeyRef?: SecretKeyRef;
  envRef?: string;
}

interface RtObject<Kind extends string, Spec> {
  apiVersion: string;
  kind: Kind;
  metadata: ObjectMeta;
  scopes?: string[];
  spec: Spec;
  status?: ResourceStatus;
}

export interface ComponentSpecFields {
  /** `<api>.<name>`, e.g. state.redis. */
  type: string;
  version: string;
  ignoreErrors?: boolean;
  initTimeout?: string;
  metadata?: MetadataEntry[];
}

export interface ComponentObject extends RtObject<'Component', ComponentSpecFields> {
  auth?: { secretStore?: string };
}

export type ConfigurationObject = RtObject<'Configuration', { features?: { name: string; enabled?: boolean }[]; [k: string]: unknown }>;

export interface SubscriptionSpecFields {
  pubsubname: string;
  topic: string;
  deadLetterTopic?: string;
  metadata?: Record<string, string>;
  /** v2alpha1 */
  routes?: { rules?: { match?: string; path: string }[]; default?: string };
  /** v1alpha1 */
  route?: string;
  bulkSubscribe?: Record<string, unknown>;
}

export type SubscriptionObject = RtObject<'Subscription', SubscriptionSpecFields>;

export type HttpEndpointObject = RtObject<'HTTPEndpoint', { baseUrl: string; headers?: { name: string; value?: string; secretKeyRef?: SecretKeyRef }[] }>;

/** Policies and targets are checked by the sidecar's reader (sidecar/src/resiliency/spec.ts), not typed here. */
export type ResiliencyObject = RtObject<'Resiliency', { policies: Record<string, unknown>; targets?: Record<string, unknown> }>;

export type RtResourceObject = ComponentObject | ConfigurationObject | SubscriptionObject | HttpEndpointObject | ResiliencyObject;

/** The kinds rt serves to sidecars, with their plural (API path) and the version the operator reads. */
export const RESOURCE_KINDS = [
  { kind: 'Component', plural: 'components', version: 'v1alpha1' },
  { kind: 'Configuration', plural: 'configurations', version: 'v1alpha1' },
  { kind: 'Subscription', plural: 'subscriptions', version: 'v2alpha1' },
  { kind: 'HTTPEndpoint', plural: 'httpendpoints', version: 'v1alpha1' },
  { kind: 'Resiliency', plural: 'resiliencies', version: 'v1alpha1' },
] as const;

export type ResourceKind = (typeof RESOURCE_KINDS)[number]['kind'];
