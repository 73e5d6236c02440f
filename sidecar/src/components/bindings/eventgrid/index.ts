/**
 * The event-routing binding (`bindings.cloud.eventrouter`, alias `bindings.azure.eventgrid`).
 *
 * Output: `create` publishes CloudEvents to a custom topic (publisher.ts).
 * Input: at start, a webhook server on `handshakePort` (webhook.ts, tokens checked by jwt.ts),
 * then the event subscription at `scope` is created or updated to point at `subscriberEndpoint`
 * (subscription.ts). The webhook listens first because the service runs the validation
 * handshake while it creates the subscription.
 */
import { badRequest } from '../../../http/errors.ts';
import type {
  BindingRequest,
  BindingResponse,
  ComponentContext,
  ComponentFactory,
  ComponentSpec,
  InputBinding,
  OutputBinding,
} from '../../types.ts';
import type { Logger } from 'pino';
import { parseMetadata, type EventRouterMetadata, type InputSettings } from './metadata.ts';
import { TopicPublisher } from './publisher.ts';
import type { EnsureResult, SubscriptionManager } from './subscription.ts';
import { TokenValidator } from './jwt.ts';
import { WebhookServer } from './webhook.ts';

export const factory: ComponentFactory = () => new EventRouterBinding();

export class EventRouterBinding implements OutputBinding, InputBinding {
  private md?: EventRouterMetadata;
  private name = '';
  private ctx?: ComponentContext;
  private log?: Logger;
  private publisher?: TopicPublisher;
  private subscriptions?: SubscriptionManager;
  private validator?: TokenValidator;
  private webhook?: WebhookServer;
  private started = false;
  private readonly closing = new AbortController();
  private background?: Promise<void>;
  /** Where the event subscription stands: shown in logs, read by tests and health checks. */
  subscriptionStatus: 'not-started' | 'pending' | 'failed' | EnsureResult = 'not-started';

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    this.name = spec.name;
    this.ctx = ctx;
    this.log = ctx.log.child({ component: spec.name, type: spec.type });
    const nonStringKeys = (spec as ComponentSpec & { nonStringKeys?: string[] }).nonStringKeys;
    this.md = parseMetadata(spec.metadata, { componentName: spec.name, nonStringKeys });
    if (this.md.output) {
      this.publisher = new TopicPublisher(this.md.output, spec.name, `/${ctx.namespace}/${ctx.appId}/bindings/${spec.name}`);
    }
    const input = this.md.input;
    if (input) {
      if (!ctx.deliverToApp) throw new Error('the input direction needs a sidecar that can deliver events to the app');
      const { loadCloudSdks, SubscriptionManager } = await import('./subscription.ts');
      this.subscriptions = new SubscriptionManager(await loadCloudSdks(), input, this.log);
      this.validator = new TokenValidator({
        authorityHost: input.authorityHost,
        tenantId: input.tenantId,
        audiences: audiencesFor(input),
        jwksRefreshCooldownMs: input.jwksRefreshCooldownMs,
      });
    }
  }

  capabilities(): string[] {
    const c: string[] = [];
    if (this.md?.input) c.push('INPUT_BINDING');
    if (this.md?.output) c.push('OUTPUT_BINDING');
    return c;
  }

  operations(): string[] {
    return this.publisher ? ['create'] : [];
  }

  async invoke(req: BindingRequest): Promise<BindingResponse> {
    if (!this.publisher) throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${this.name}" is configured for the input direction only`);
    if (req.operation !== 'create') throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${this.name}" does not support operation "${req.operation}"; supported: create`);
    return this.publisher.create(req);
  }

  /**
   * Input: the webhook listens, then the event subscription is created or updated in the
   * background. Writing a subscription takes the service many seconds (it runs the validation
   * handshake first); the sidecar starts input bindings one after the other, so start() must
   * not hold the others back. The outcome is logged and kept in subscriptionStatus.
   */
  async start(): Promise<void> {
    const input = this.md?.input;
    if (!input || this.started || !this.validator || !this.subscriptions) return;
    this.started = true;
    const deliver = this.ctx!.deliverToApp!;
    const name = this.name;
    this.webhook = new WebhookServer({
      port: input.handshakePort,
      host: input.handshakeAddress ?? listenAddressOf(this.ctx!) ?? '0.0.0.0',
      validator: this.validator,
      deliver: (event) => deliver(name, event),
      log: this.log!,
    });
    const port = await this.webhook.start();
    this.log!.info({ port }, 'event-routing webhook listening');
    this.subscriptionStatus = 'pending';
    this.background = this.ensureSubscription(input, this.validator, this.subscriptions);
  }

  private async ensureSubscription(input: InputSettings, validator: TokenValidator, subscriptions: SubscriptionManager): Promise<void> {
    // keys fetched now so the first delivery is fast; a failure here is retried per delivery
    await validator.warmUp().catch((e) => this.log!.warn({ err: (e as Error).message }, 'could not load the OpenID configuration yet'));
    try {
      const result = await subscriptions.ensure(this.closing.signal);
      this.subscriptionStatus = result;
      this.log!.info({ eventSubscription: input.eventSubscriptionName, result }, `event subscription ${result}`);
    } catch (e) {
      this.subscriptionStatus = 'failed';
      if (this.closing.signal.aborted) return;
      // the SDK has already retried transient failures; what is left needs a person
      this.log!.error(
        { eventSubscription: input.eventSubscriptionName, scope: input.scope },
        `creating or updating event subscription "${input.eventSubscriptionName}" at ${input.scope} failed: ${(e as Error).message}`,
      );
    }
  }

  async close(): Promise<void> {
    this.closing.abort();
    await this.background;
    await this.webhook?.close();
    this.webhook = undefined;
  }
}

/**
 * Audiences a delivery token may carry: the application ID (what the subscription asks the
 * service to request tokens for), its api:// URI form, or the webhook's endpoint.
 */
function audiencesFor(input: InputSettings): string[] {
  const endpoint = input.subscriberEndpoint.href;
  const auds = new Set([input.clientId, `api://${input.clientId}`, endpoint, endpoint.replace(/\/$/, '')]);
  return [...auds];
}

/** The sidecar's listen address, when its context offers one. */
function listenAddressOf(ctx: ComponentContext): string | undefined {
  const a = (ctx as ComponentContext & { listenAddress?: unknown }).listenAddress;
  return typeof a === 'string' && a !== '' ? a : undefined;
}
