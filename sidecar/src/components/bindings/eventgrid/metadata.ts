/**
 * Metadata of the event-routing binding (`bindings.cloud.eventrouter`, alias
 * `bindings.azure.eventgrid`): parsing and validation. Every problem is a MetadataError that
 * names the field, so a user can fix the component file without reading code.
 */
import { decodeMetadata, defineMetadata, MetadataError, metadataFields, presentFields } from '../../metadata/decode.ts';

export { MetadataError };

export type Direction = 'input' | 'output';

export interface OutputSettings {
  topicEndpoint: URL;
  accessKey: string;
  /** Bound on one publish call (request + response). */
  publishTimeoutMs: number;
}

export interface InputSettings {
  tenantId: string;
  subscriptionId: string;
  clientId: string;
  clientSecret: string;
  subscriberEndpoint: URL;
  handshakePort: number;
  /** Bind address of the webhook server; undefined = the sidecar's choice. */
  handshakeAddress?: string;
  /** The scope as written, with the trailing slash removed. */
  scope: string;
  eventSubscriptionName: string;
  /** Entra ID authority host (advanced/test option `azureAuthorityHost`). */
  authorityHost: string;
  /** ARM endpoint (advanced/test option `armEndpoint`). */
  armEndpoint: string;
  /** Poll interval of the ARM long-running operation when ARM sends no Retry-After. */
  armPollIntervalMs: number;
  /** Least time between two JWKS downloads caused by unknown key ids. */
  jwksRefreshCooldownMs: number;
}

export interface EventRouterMetadata {
  directions: Set<Direction>;
  output?: OutputSettings;
  input?: InputSettings;
}

export const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com';
export const DEFAULT_ARM_ENDPOINT = 'https://management.azure.com';

const OUTPUT_REQUIRED = ['accessKey', 'topicEndpoint'] as const;
const INPUT_REQUIRED = ['cloudTenantId', 'cloudSubscriptionId', 'cloudClientId', 'cloudClientSecret', 'subscriberEndpoint', 'handshakePort', 'scope'] as const;

const TYPES = ['bindings.cloud.eventrouter', 'bindings.azure.eventgrid'];
const COMMON = metadataFields({
  /** input, output or both; unset: the side(s) whose fields are present. */
  direction: { type: 'list', values: ['input', 'output'] },
});
const OUTPUT = metadataFields({
  accessKey: { type: 'string', secret: true },
  topicEndpoint: { type: 'string' },
  publishTimeout: { type: 'duration', default: 10_000, min: 100, max: 10 * 60_000 },
});
/** The ecosystem's Azure Event Grid binding names the cloud fields azure… (or without a prefix). */
const INPUT = metadataFields({
  cloudTenantId: { type: 'string', aliases: ['azureTenantId', 'tenantId'] },
  cloudSubscriptionId: { type: 'string', aliases: ['azureSubscriptionId', 'subscriptionId'] },
  cloudClientId: { type: 'string', aliases: ['azureClientId', 'clientId'] },
  cloudClientSecret: { type: 'string', secret: true, aliases: ['azureClientSecret', 'clientSecret'] },
  subscriberEndpoint: { type: 'string' },
  handshakePort: { type: 'integer', min: 1, max: 65535 },
  scope: { type: 'string' },
  eventSubscriptionName: { type: 'string' },
  handshakeAddress: { type: 'string' },
  azureAuthorityHost: { type: 'string' },
  armEndpoint: { type: 'string' },
  armPollInterval: { type: 'duration', default: 2000, min: 10, max: 60_000 },
  jwksRefreshCooldown: { type: 'duration', default: 30_000, min: 0, max: 3_600_000 },
});
const COMMON_ONLY = defineMetadata(TYPES, COMMON);
/**
 * Every field, and the rule that each direction served has its fields (`servedDirections`). The
 * binding decodes a direction's fields only when it serves it; a check by this declaration (the
 * operator's) decodes them all.
 */
export const METADATA = defineMetadata(TYPES, { ...COMMON, ...OUTPUT, ...INPUT }, [(md, present) => void servedDirections(md, present)]);
const OUTPUT_ONLY = defineMetadata(TYPES, OUTPUT);
const INPUT_ONLY = defineMetadata(TYPES, INPUT);

const GUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const GUID_RE = new RegExp(`^${GUID}$`);
// a tenant is a GUID or a verified domain name (contoso.onmicrosoft.com)
const TENANT_RE = new RegExp(`^(${GUID}|[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)+)$`);
const CLIENT_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,254}$/;
const SUBSCRIPTION_NAME_RE = /^[A-Za-z0-9]{3,64}$/;

// The four scope forms of the contract; the last two share one shape
// (a topic is a top-level resource whose type is "topics").
const RG = "[\\p{L}\\p{N}._()-]{1,90}";
const NS = '[A-Za-z][A-Za-z0-9]*(?:\\.[A-Za-z][A-Za-z0-9]*)+';
const TYPE = '[A-Za-z][A-Za-z0-9]*';
const NAME = "[^/?#\\s%]{1,260}";
const SCOPE_FORMS: { what: string; re: RegExp }[] = [
  { what: 'subscription', re: new RegExp(`^/subscriptions/(${GUID})/?$`, 'iu') },
  { what: 'resource group', re: new RegExp(`^/subscriptions/(${GUID})/resourceGroups/${RG}/?$`, 'iu') },
  { what: 'resource', re: new RegExp(`^/subscriptions/(${GUID})/resourceGroups/${RG}/providers/${NS}/${TYPE}/${NAME}/?$`, 'iu') },
];

export interface ParseOptions {
  /** The component's name: source of the default eventSubscriptionName. */
  componentName: string;
  /**
   * Metadata keys whose YAML value was not a string (number, boolean). The resource loader
   * does not report this yet; when it does, a numeric handshakePort is rejected here.
   */
  nonStringKeys?: readonly string[];
}

/** Parses and validates the component metadata. Throws MetadataError naming the field. */
export function parseMetadata(raw: Record<string, string>, opts: ParseOptions): EventRouterMetadata {
  const directions = servedDirections(raw, presentFields(METADATA, raw));
  const out: EventRouterMetadata = { directions };
  if (directions.has('output')) {
    const md = decodeMetadata(OUTPUT_ONLY, raw);
    out.output = {
      accessKey: md.accessKey!,
      topicEndpoint: httpsUrl('topicEndpoint', md.topicEndpoint!.trim()),
      publishTimeoutMs: md.publishTimeout,
    };
  }
  if (directions.has('input')) {
    if (opts.nonStringKeys?.includes('handshakePort')) {
      throw new MetadataError('handshakePort', `must be passed as a quoted string in YAML (value: "${raw.handshakePort}"), not as a number`);
    }
    const md = decodeMetadata(INPUT_ONLY, raw);
    const tenantId = md.cloudTenantId!.trim();
    if (!TENANT_RE.test(tenantId)) throw new MetadataError('cloudTenantId', 'must be a tenant ID (GUID) or the tenant\'s domain name');
    const subscriptionId = md.cloudSubscriptionId!.trim();
    if (!GUID_RE.test(subscriptionId)) throw new MetadataError('cloudSubscriptionId', 'must be a subscription ID (a GUID)');
    const clientId = md.cloudClientId!.trim();
    if (!CLIENT_ID_RE.test(clientId)) throw new MetadataError('cloudClientId', 'must be an application (client) ID');
    const subscriberEndpoint = httpsUrl('subscriberEndpoint', md.subscriberEndpoint!.trim());
    const scope = parseScope(md.scope!.trim(), subscriptionId);
    let eventSubscriptionName: string;
    if (md.eventSubscriptionName !== undefined) {
      eventSubscriptionName = md.eventSubscriptionName.trim();
      if (!SUBSCRIPTION_NAME_RE.test(eventSubscriptionName)) {
        throw new MetadataError('eventSubscriptionName', `"${eventSubscriptionName.slice(0, 80)}" is not valid: 3 to 64 characters, letters and digits only`);
      }
    } else {
      eventSubscriptionName = defaultSubscriptionName(opts.componentName);
    }
    let handshakeAddress: string | undefined;
    if (md.handshakeAddress !== undefined) {
      handshakeAddress = md.handshakeAddress.trim();
      if (!/^[0-9A-Fa-f.:]+$|^localhost$/.test(handshakeAddress)) throw new MetadataError('handshakeAddress', 'must be an IP address to bind to, e.g. 0.0.0.0 or 127.0.0.1');
    }
    out.input = {
      tenantId,
      subscriptionId,
      clientId,
      clientSecret: md.cloudClientSecret!,
      subscriberEndpoint,
      handshakePort: md.handshakePort!,
      handshakeAddress,
      scope,
      eventSubscriptionName,
      authorityHost: md.azureAuthorityHost !== undefined ? origin('azureAuthorityHost', md.azureAuthorityHost.trim()) : DEFAULT_AUTHORITY_HOST,
      armEndpoint: md.armEndpoint !== undefined ? origin('armEndpoint', md.armEndpoint.trim()) : DEFAULT_ARM_ENDPOINT,
      armPollIntervalMs: md.armPollInterval,
      jwksRefreshCooldownMs: md.jwksRefreshCooldown,
    };
  }
  return out;
}

/** Default event subscription name: the component name without non-alphanumerics, 3–64 long. */
export function defaultSubscriptionName(componentName: string): string {
  let n = componentName.replace(/[^A-Za-z0-9]/g, '').slice(0, 64);
  if (n.length < 3) n = `${n}sub`.slice(0, 64); // names of one or two characters would be rejected by the service
  return n;
}

/**
 * The directions the binding serves (`direction`, else the side(s) whose fields are present), each
 * with its required fields set; throws MetadataError naming the field.
 */
function servedDirections(raw: Readonly<Record<string, string>>, present: ReadonlySet<string>): Set<Direction> {
  const has = (k: string) => present.has(k);
  const directions = parseDirection(decodeMetadata(COMMON_ONLY, raw).direction, has);
  if (directions.has('output')) requireFields('output', OUTPUT_REQUIRED, has);
  if (directions.has('input')) requireFields('input', INPUT_REQUIRED, has);
  return directions;
}

function parseDirection(value: ('input' | 'output')[] | undefined, has: (k: string) => boolean): Set<Direction> {
  const out = new Set<Direction>(value);
  if (out.size > 0) return out;
  // no direction: serve the side(s) whose fields are present
  if (OUTPUT_REQUIRED.some(has)) out.add('output');
  if (INPUT_REQUIRED.some(has)) out.add('input');
  if (out.size === 0) {
    throw new MetadataError(
      'direction',
      `is not set and neither side is configured: output needs ${OUTPUT_REQUIRED.join(', ')}; input needs ${INPUT_REQUIRED.join(', ')}`,
    );
  }
  return out;
}

function requireFields(direction: Direction, fields: readonly string[], has: (k: string) => boolean): void {
  const missing = fields.filter((f) => !has(f));
  if (missing.length === 1) throw new MetadataError(missing[0], `is required for the ${direction} direction`);
  if (missing.length > 1) {
    const names = missing.map((f) => `"${f}"`).join(', ');
    throw new MetadataError(missing[0], '', `metadata fields ${names} are required for the ${direction} direction`);
  }
}

function httpsUrl(field: string, value: string): URL {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new MetadataError(field, `must be an absolute https:// URL, got "${value.slice(0, 200)}"`);
  }
  if (u.protocol !== 'https:') throw new MetadataError(field, `must use https:// (got ${u.protocol.replace(':', '')})`);
  if (u.username || u.password) throw new MetadataError(field, 'must not carry credentials in the URL');
  if (!u.hostname) throw new MetadataError(field, 'must name a host');
  return u;
}

function origin(field: string, value: string): string {
  const u = httpsUrl(field, value);
  if (u.pathname !== '/' || u.search || u.hash) throw new MetadataError(field, 'must be a scheme and host only, e.g. https://login.microsoftonline.com');
  return u.origin;
}

function parseScope(scope: string, subscriptionId: string): string {
  for (const form of SCOPE_FORMS) {
    const m = form.re.exec(scope);
    if (!m) continue;
    if (m[1].toLowerCase() !== subscriptionId.toLowerCase()) {
      throw new MetadataError('scope', `names subscription ${m[1]}, but cloudSubscriptionId is ${subscriptionId}`);
    }
    return scope.replace(/\/+$/, '');
  }
  throw new MetadataError(
    'scope',
    `"${scope.slice(0, 200)}" is not a valid scope; use /subscriptions/<id>/, /subscriptions/<id>/resourceGroups/<group>, ` +
      `/subscriptions/<id>/resourceGroups/<group>/providers/<namespace>/<type>/<name> or .../providers/<namespace>/topics/<topic>`,
  );
}
