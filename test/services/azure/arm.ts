/**
 * Loopback stand-in for Azure Resource Manager's event-subscription API (Microsoft.EventGrid),
 * the part @azure/arm-eventgrid uses:
 *   GET  /<scope>/providers/Microsoft.EventGrid/eventSubscriptions/<name>?api-version=…
 *   PUT  same                → 201, provisioningState "Creating", Azure-AsyncOperation header
 *   GET  /subscriptions/<id>/providers/Microsoft.EventGrid/locations/global/operationsStatus/<op>
 *                            → {"status": "InProgress" | "Succeeded" | "Failed"}
 *   POST …/eventSubscriptions/<name>/getFullUrl
 * Every call needs a bearer token from the Entra stand-in for this ARM audience. Like the
 * real service, a PUT with a WebHook destination runs the CloudEvents validation handshake
 * (OPTIONS) against the webhook before the operation succeeds.
 */
import { randomUUID } from 'node:crypto';
import type { TestCa } from '../ca.ts';
import type { EntraStandIn } from './entra.ts';
import { json, startHttps } from './https.ts';

export interface StoredSubscription {
  id: string;
  name: string;
  scope: string;
  endpointUrl: string;
  tenantId?: string;
  applicationIdOrUri?: string;
  eventDeliverySchema?: string;
  provisioningState: string;
}

export interface ArmStandIn {
  url: string;
  /** Stored subscriptions by lower-cased resource id. */
  subscriptions: Map<string, StoredSubscription>;
  /** Every call: method and path (no query). */
  calls: { method: string; path: string }[];
  /**
   * Where the validation handshake goes: the real service calls the subscriberEndpoint through
   * the ingress; here the test names the webhook's loopback URL. Unset = no handshake.
   */
  handshakeTarget?: string;
  /** Handshakes run and their outcome. */
  handshakes: { status: number; allowedOrigin?: string }[];
  /** Puts a subscription in place as if it existed before (no call recorded). */
  seed(scope: string, name: string, s: Omit<StoredSubscription, 'id' | 'name' | 'scope' | 'provisioningState'>): void;
  close(): Promise<void>;
}

const API_VERSION_RE = /^\d{4}-\d{2}-\d{2}(-preview)?$/;

export async function startArmStandIn(ca: TestCa, entra: EntraStandIn): Promise<ArmStandIn> {
  const subscriptions = new Map<string, StoredSubscription>();
  const operations = new Map<string, { status: string; polls: number; error?: { code: string; message: string }; done: Promise<void> }>();
  const calls: { method: string; path: string }[] = [];
  let base = '';
  const arm: ArmStandIn = {
    url: '',
    subscriptions,
    calls,
    handshakes: [],
    seed(scope, name, s) {
      const id = `${normScope(scope)}/providers/Microsoft.EventGrid/eventSubscriptions/${name}`;
      subscriptions.set(id.toLowerCase(), { ...s, id, name, scope: normScope(scope), provisioningState: 'Succeeded' });
    },
    close: () => server.close(),
  };

  const handshake = async (sub: StoredSubscription): Promise<{ code: string; message: string } | undefined> => {
    if (!arm.handshakeTarget) return undefined;
    try {
      const res = await fetch(arm.handshakeTarget, {
        method: 'OPTIONS',
        headers: { 'WebHook-Request-Origin': 'eventgrid.azure.net', 'WebHook-Request-Rate': '120' },
        signal: AbortSignal.timeout(5000),
      });
      await res.arrayBuffer();
      const allowed = res.headers.get('webhook-allowed-origin') ?? undefined;
      arm.handshakes.push({ status: res.status, allowedOrigin: allowed });
      if (res.status === 200 && (allowed === 'eventgrid.azure.net' || allowed === '*')) return undefined;
      return { code: 'Url validation', message: `Webhook validation handshake failed for ${sub.endpointUrl.split('?')[0]}. Http OPTIONS request failed with response code ${res.status}.` };
    } catch (e) {
      arm.handshakes.push({ status: 0 });
      return { code: 'Url validation', message: `Webhook validation handshake failed: ${(e as Error).message}` };
    }
  };

  const server = await startHttps(ca, async (req, res, body) => {
    const u = new URL(req.url ?? '/', 'https://x');
    const path = u.pathname.replace(/\/{2,}/g, '/');
    calls.push({ method: req.method ?? '', path });
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!auth) return json(res, 401, { error: { code: 'AuthenticationFailed', message: "Authentication failed. The 'Authorization' header is missing." } });
    try {
      await entra.verify(auth[1], base);
    } catch (e) {
      return json(res, 401, { error: { code: 'InvalidAuthenticationToken', message: `The access token is invalid: ${(e as Error).message}` } });
    }
    if (!API_VERSION_RE.test(u.searchParams.get('api-version') ?? '')) {
      return json(res, 400, { error: { code: 'MissingApiVersionParameter', message: "The api-version query parameter (?api-version=) is required for all requests." } });
    }

    const op = /^\/subscriptions\/[^/]+\/providers\/Microsoft\.EventGrid\/locations\/[^/]+\/operationsStatus\/([^/]+)$/i.exec(path);
    if (op && req.method === 'GET') {
      const o = operations.get(op[1]);
      if (!o) return json(res, 404, { error: { code: 'NotFound', message: 'operation not found' } });
      o.polls++;
      if (o.polls === 1) await o.done; // finishes by the first poll, after the handshake
      return json(res, 200, { id: path, name: op[1], status: o.status, ...(o.error ? { error: o.error } : {}) });
    }

    const m = /^(\/subscriptions\/.+)\/providers\/Microsoft\.EventGrid\/eventSubscriptions\/([^/]+)(\/getFullUrl)?$/i.exec(path);
    if (!m) return json(res, 404, { error: { code: 'InvalidResourceType', message: `no route for ${req.method} ${path}` } });
    const [, scope, name, fullUrl] = m;
    const id = `${scope}/providers/Microsoft.EventGrid/eventSubscriptions/${name}`;
    const key = id.toLowerCase();
    const existing = subscriptions.get(key);

    if (fullUrl) {
      if (req.method !== 'POST') return json(res, 405, { error: { code: 'MethodNotAllowed', message: 'use POST' } });
      if (!existing) return notFound(res, name);
      return json(res, 200, { endpointUrl: existing.endpointUrl });
    }
    if (req.method === 'GET') {
      if (!existing) return notFound(res, name);
      return json(res, 200, resource(existing));
    }
    if (req.method === 'PUT') {
      if (!/^[A-Za-z0-9]{3,64}$/.test(name)) return json(res, 400, { error: { code: 'InvalidRequest', message: 'Event subscription name must be 3-64 alphanumeric characters.' } });
      let info: { properties?: { destination?: { endpointType?: string; properties?: Record<string, string> }; eventDeliverySchema?: string } };
      try {
        info = JSON.parse(body.toString('utf8'));
      } catch {
        return json(res, 400, { error: { code: 'InvalidRequestContent', message: 'The request content was invalid and could not be deserialized.' } });
      }
      const dest = info.properties?.destination;
      const url = dest?.properties?.endpointUrl;
      if (dest?.endpointType !== 'WebHook' || typeof url !== 'string' || !url.startsWith('https://')) {
        return json(res, 400, { error: { code: 'InvalidRequest', message: 'Destination must be a WebHook with an https endpointUrl.' } });
      }
      const sub: StoredSubscription = {
        id,
        name,
        scope,
        endpointUrl: url,
        tenantId: dest.properties?.azureActiveDirectoryTenantId,
        applicationIdOrUri: dest.properties?.azureActiveDirectoryApplicationIdOrUri,
        eventDeliverySchema: info.properties?.eventDeliverySchema ?? 'EventGridSchema',
        provisioningState: existing ? 'Updating' : 'Creating',
      };
      subscriptions.set(key, sub);
      const opId = randomUUID().toUpperCase();
      const entry = { status: 'InProgress', polls: 0, error: undefined as { code: string; message: string } | undefined, done: Promise.resolve() };
      entry.done = handshake(sub).then((err) => {
        entry.status = err ? 'Failed' : 'Succeeded';
        entry.error = err;
        sub.provisioningState = err ? 'Failed' : 'Succeeded';
      });
      operations.set(opId, entry);
      const subId = scope.split('/')[2];
      const asyncOp = `${base}/subscriptions/${subId}/providers/Microsoft.EventGrid/locations/global/operationsStatus/${opId}?api-version=${u.searchParams.get('api-version')}`;
      return json(res, existing ? 200 : 201, resource(sub), { 'Azure-AsyncOperation': asyncOp });
    }
    return json(res, 405, { error: { code: 'MethodNotAllowed', message: `${req.method} is not supported by the stand-in` } });
  });
  base = server.url;
  arm.url = base;
  return arm;
}

function normScope(scope: string): string {
  return `/${scope.replace(/^\/+|\/+$/g, '')}`;
}

function notFound(res: Parameters<typeof json>[0], name: string): void {
  json(res, 404, { error: { code: 'ResourceNotFound', message: `The Resource 'Microsoft.EventGrid/eventSubscriptions/${name}' was not found.` } });
}

/** The resource as the service returns it: the full URL is never returned, only its base. */
function resource(s: StoredSubscription): unknown {
  const baseUrl = s.endpointUrl.split('?')[0];
  return {
    id: s.id,
    name: s.name,
    type: 'Microsoft.EventGrid/eventSubscriptions',
    properties: {
      topic: s.scope,
      provisioningState: s.provisioningState,
      destination: {
        endpointType: 'WebHook',
        properties: {
          endpointBaseUrl: baseUrl,
          maxEventsPerBatch: 1,
          preferredBatchSizeInKilobytes: 64,
          azureActiveDirectoryTenantId: s.tenantId,
          azureActiveDirectoryApplicationIdOrUri: s.applicationIdOrUri,
        },
      },
      filter: { includedEventTypes: null, advancedFilters: [], enableAdvancedFilteringOnArrays: true },
      labels: [],
      eventDeliverySchema: s.eventDeliverySchema,
      retryPolicy: { maxDeliveryAttempts: 30, eventTimeToLiveInMinutes: 1440 },
    },
  };
}
