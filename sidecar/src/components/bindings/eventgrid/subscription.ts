/**
 * Creates or updates the event subscription at `scope` with the cloud SDKs: a client-secret
 * credential from @azure/identity and the ARM client of @azure/arm-eventgrid. The subscription
 * is written only when what exists differs from what the metadata asks for.
 *
 * The SDKs are heavy: they are imported here, lazily, and only by a component with the input
 * direction (see loadCloudSdks), so a sidecar without this binding never loads them.
 */
import type { EventSubscription, EventGridManagementClient as ArmClient, WebHookEventSubscriptionDestination } from '@azure/arm-eventgrid';
import type { Logger } from 'pino';
import { DEFAULT_AUTHORITY_HOST, type InputSettings } from './metadata.ts';

export interface CloudSdks {
  identity: typeof import('@azure/identity');
  arm: typeof import('@azure/arm-eventgrid');
}

export async function loadCloudSdks(): Promise<CloudSdks> {
  // one after the other: both load the same ESM-only dependencies through require(), and
  // loading them concurrently makes Node refuse (ERR_REQUIRE_ESM_RACE_CONDITION)
  const identity = await import('@azure/identity');
  const arm = await import('@azure/arm-eventgrid');
  return { identity, arm };
}

/** Authority hosts of the public and national clouds: the SDK knows them, no discovery needed. */
const KNOWN_AUTHORITIES = new Set([
  DEFAULT_AUTHORITY_HOST,
  'https://login.microsoftonline.us',
  'https://login.chinacloudapi.cn',
  'https://login.microsoftonline.de',
]);

export type EnsureResult = 'created' | 'updated' | 'unchanged';

export class SubscriptionManager {
  private readonly client: ArmClient;
  private readonly settings: InputSettings;
  private readonly log: Logger;

  constructor(sdks: CloudSdks, settings: InputSettings, log: Logger) {
    this.settings = settings;
    this.log = log;
    const credential = new sdks.identity.ClientSecretCredential(settings.tenantId, settings.clientId, settings.clientSecret, {
      authorityHost: settings.authorityHost,
      // instance discovery asks the public cloud about the host: only meaningful for its own hosts
      disableInstanceDiscovery: !KNOWN_AUTHORITIES.has(settings.authorityHost),
    });
    // `endpoint` drives the token scope (<endpoint>/.default), `$host` the request URLs
    this.client = new sdks.arm.EventGridManagementClient(credential, settings.subscriptionId, {
      endpoint: settings.armEndpoint,
      $host: settings.armEndpoint,
    });
  }

  /** What the subscription should look like. */
  desired(): EventSubscription {
    const destination: WebHookEventSubscriptionDestination = {
      endpointType: 'WebHook',
      endpointUrl: this.settings.subscriberEndpoint.href,
      azureActiveDirectoryTenantId: this.settings.tenantId,
      azureActiveDirectoryApplicationIdOrUri: this.settings.clientId,
    };
    return { destination, eventDeliverySchema: 'CloudEventSchemaV1_0' };
  }

  /** `signal` aborts the calls (the component closes while the subscription is being written). */
  async ensure(signal?: AbortSignal): Promise<EnsureResult> {
    // the SDK's path template is "/{scope}/providers/…": hand it the scope without its leading slash
    const scope = this.settings.scope.replace(/^\/+/, '');
    const name = this.settings.eventSubscriptionName;
    const existing = await this.get(scope, name, signal);
    if (existing && this.settings.subscriberEndpoint.search) await this.withFullUrl(existing, scope, name, signal);
    if (existing && !differs(existing, this.desired(), this.settings)) {
      this.log.info({ eventSubscription: name, scope: this.settings.scope }, 'event subscription is up to date');
      return 'unchanged';
    }
    this.log.info({ eventSubscription: name, scope: this.settings.scope }, existing ? 'updating event subscription' : 'creating event subscription');
    const result = await this.client.eventSubscriptions.beginCreateOrUpdateAndWait(scope, name, this.desired(), {
      updateIntervalInMs: this.settings.armPollIntervalMs,
      abortSignal: signal,
    });
    if (result.provisioningState && result.provisioningState !== 'Succeeded') {
      throw new Error(`event subscription "${name}" ended in provisioning state ${result.provisioningState}`);
    }
    return existing ? 'updated' : 'created';
  }

  /** The service returns only the base URL; with a query string in ours, ask for the full one. */
  private async withFullUrl(existing: EventSubscription, scope: string, name: string, signal?: AbortSignal): Promise<void> {
    const d = existing.destination as Partial<WebHookEventSubscriptionDestination> | undefined;
    if (!d || d.endpointType !== 'WebHook' || d.endpointUrl !== undefined) return;
    const full = await this.client.eventSubscriptions.getFullUrl(scope, name, { abortSignal: signal });
    if (full.endpointUrl) d.endpointUrl = full.endpointUrl;
  }

  private async get(scope: string, name: string, signal?: AbortSignal): Promise<EventSubscription | undefined> {
    try {
      return await this.client.eventSubscriptions.get(scope, name, { abortSignal: signal });
    } catch (e) {
      if ((e as { statusCode?: number }).statusCode === 404) return undefined;
      throw e;
    }
  }
}

/** Whether the existing subscription needs a write to match what we want. */
export function differs(existing: EventSubscription, desired: EventSubscription, settings: InputSettings): boolean {
  const have = existing.destination as Partial<WebHookEventSubscriptionDestination> | undefined;
  const want = desired.destination as WebHookEventSubscriptionDestination;
  if (!have || have.endpointType !== 'WebHook') return true;
  // a subscription whose last write failed (or never finished) is written again
  if (existing.provisioningState && existing.provisioningState !== 'Succeeded') return true;
  if (existing.eventDeliverySchema !== desired.eventDeliverySchema) return true;
  // the service never returns the full URL (it may hold secrets in its query): compare the base
  const base = `${settings.subscriberEndpoint.origin}${settings.subscriberEndpoint.pathname}`;
  const haveUrl = have.endpointUrl ?? have.endpointBaseUrl;
  if (haveUrl === undefined) return true;
  if (have.endpointUrl !== undefined ? have.endpointUrl !== want.endpointUrl : stripSlash(have.endpointBaseUrl!) !== stripSlash(base)) return true;
  if (settings.subscriberEndpoint.search && have.endpointUrl === undefined) return true; // the query cannot be compared: write it
  if ((have.azureActiveDirectoryTenantId ?? '').toLowerCase() !== (want.azureActiveDirectoryTenantId ?? '').toLowerCase()) return true;
  if ((have.azureActiveDirectoryApplicationIdOrUri ?? '') !== (want.azureActiveDirectoryApplicationIdOrUri ?? '')) return true;
  return false;
}

function stripSlash(u: string): string {
  return u.replace(/\/+$/, '');
}
