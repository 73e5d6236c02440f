/**
 * Invocation of HTTP services outside rt: an `HTTPEndpoint` resource by name (its base URL, its
 * headers — secretKeyRef ones looked up per call — and its clientTLS), or a URL given as the
 * target itself (`/v1.0/invoke/https%3A%2F%2Fhost/method/...`). Bodies stream as between sidecars.
 */
import { Agent, type Dispatcher } from '../util/http-client.ts';
import type { ComponentRegistry } from '../components/registry.ts';
import type { HttpEndpointResource, ValueOrSecret } from '../resources/types.ts';
import { headerObject, responseHeaders } from './headers.ts';
import { directInvokeError, type InvokeAnswer, type InvokeCall } from './call.ts';

export interface EndpointTarget {
  name: string;
  baseUrl: string;
  endpoint?: HttpEndpointResource;
}

/** An HTTPEndpoint of that name, or an http(s) URL; undefined for an app id. */
export function endpointTarget(target: string, endpoints: HttpEndpointResource[]): EndpointTarget | undefined {
  const endpoint = endpoints.find((e) => e.name === target);
  if (endpoint) return { name: target, baseUrl: endpoint.baseUrl, endpoint };
  if (/^https?:\/\/[^/]/i.test(target)) {
    try {
      new URL(target);
    } catch {
      return undefined;
    }
    return { name: target, baseUrl: target };
  }
  return undefined;
}

export class EndpointCaller {
  private readonly agents = new Map<string, Agent>();
  private readonly plain = new Agent({ keepAliveTimeout: 30_000 });
  private readonly components: ComponentRegistry;
  private readonly defaultSecretStore?: string;

  constructor(components: ComponentRegistry, defaultSecretStore?: string) {
    this.components = components;
    this.defaultSecretStore = defaultSecretStore;
  }

  async call(t: EndpointTarget, c: InvokeCall): Promise<InvokeAnswer> {
    const headers = headerObject(c.headers.filter((h) => h.name !== 'rt-app-id' && h.name !== 'dapr-app-id'));
    let dispatcher: Dispatcher = this.plain;
    if (t.endpoint) {
      for (const [k, v] of Object.entries(t.endpoint.headers)) headers[k.toLowerCase()] = v;
      for (const h of t.endpoint.secretHeaders ?? []) headers[h.name.toLowerCase()] = (await this.secret(t.endpoint, { secretKeyRef: { name: h.secretName, key: h.key } })) ?? '';
      if (t.endpoint.clientTLS) dispatcher = await this.tlsAgent(t.endpoint);
    }
    const url = `${t.baseUrl.replace(/\/+$/, '')}${c.path}${c.query}`;
    try {
      const u = new URL(url);
      const res = await dispatcher.request({ origin: u.origin, path: `${u.pathname}${u.search}`, method: c.method as Dispatcher.HttpMethod, headers, body: c.body, signal: c.signal });
      return { status: res.statusCode, headers: responseHeaders(res.headers), body: res.body };
    } catch (e) {
      throw directInvokeError(t.name, `${c.method} ${url} failed: ${(e as Error).message}`);
    }
  }

  private async secret(e: HttpEndpointResource, v: ValueOrSecret | undefined): Promise<string | undefined> {
    if (!v) return undefined;
    if (!v.secretKeyRef) return v.value;
    const storeName = e.secretStore ?? this.defaultSecretStore ?? this.components.namesOf('secretstores')[0];
    const store = storeName ? this.components.secretStore(storeName) : undefined;
    if (!store) throw directInvokeError(e.name, `HTTPEndpoint "${e.name}" uses secretKeyRef, but secret store "${storeName ?? '(none)'}" is not loaded (auth.secretStore names it)`);
    const value = (await store.getSecret(v.secretKeyRef.name))?.[v.secretKeyRef.key];
    if (value === undefined) throw directInvokeError(e.name, `secret "${v.secretKeyRef.name}" (key "${v.secretKeyRef.key}") of HTTPEndpoint "${e.name}" not found in secret store "${storeName}"`);
    return value;
  }

  private async tlsAgent(e: HttpEndpointResource): Promise<Agent> {
    const tls = e.clientTLS!;
    const [ca, cert, key] = await Promise.all([this.secret(e, tls.rootCA), this.secret(e, tls.certificate), this.secret(e, tls.privateKey)]);
    // keyed by the material, so a rotated secret gets a new agent
    const id = JSON.stringify([e.name, ca, cert, key]);
    let agent = this.agents.get(id);
    if (!agent) {
      agent = new Agent({ keepAliveTimeout: 30_000, connect: { ca, cert, key } });
      this.agents.set(id, agent);
    }
    return agent;
  }

  async close(): Promise<void> {
    await Promise.all([this.plain, ...this.agents.values()].map((a) => a.close().catch(() => undefined)));
  }
}
