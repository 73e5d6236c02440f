/**
 * The app's subscriptions (DECLARATIVE Subscription resources, PROGRAMMATIC ones from the app's
 * /rt/subscribe or, for a gRPC app, its ListTopicSubscriptions) kept open on their components,
 * delivered through AppTargets (HTTP or gRPC). Reconciled whenever resources or components
 * change: a subscription that changed, or whose component was replaced, is re-opened; one that
 * went away is closed. One subscription per pub/sub and topic: a Subscription resource wins over
 * the app's own entry for the same topic.
 */
import type { Logger } from 'pino';
import type { ComponentRegistry } from '../components/registry.ts';
import type { PubSub, PubSubMessage, TopicSubscription } from '../components/pubsub/types.ts';
import type { SubscriptionInfo } from '../resources/types.ts';
import type { ResolvedPolicy } from '../resiliency/run.ts';
import type { ResiliencyService } from '../resiliency/service.ts';
import { CLOUDEVENT_CONTENT_TYPE, eventJson, expired, isRawPayload, rawEvent, rawPayloadOf, readEvent, type CloudEvent } from './cloudevent.ts';
import { DEFAULT_RETRY, withRetries } from './delivery.ts';
import { pubsubByName } from './lookup.ts';
import { compileRules, route, type CompiledRule } from './rules.ts';
import type { AppTargets, MessageTarget, Outcome, RetryPolicy } from './types.ts';

interface Active {
  info: SubscriptionInfo;
  fingerprint: string;
  instance: PubSub;
  sub: TopicSubscription;
  state: { closed: boolean };
}

/**
 * The handler one subscription gives its component: route by the rules, deliver with retries,
 * then the dead-letter topic. Resolving acknowledges the message, rejecting gives it back.
 *
 * With a `deadLetterTopic`, as the reference runtime does, a message goes there when the app
 * answers DROP (then a failed dead-letter publish gives the message back to the component, to be
 * delivered again), when its retries are spent, and, best effort (a failed publish is only
 * logged), when it expired or no routing rule matches it.
 *
 * When a Resiliency resource gives the pub/sub's inbound direction a policy (`inbound`), that
 * policy's timeout, retries and circuit breaker replace the built-in retries (docs/resiliency.md).
 */
export function messageHandler(
  info: SubscriptionInfo,
  rules: CompiledRule[],
  pubsub: PubSub,
  target: MessageTarget,
  policy: RetryPolicy,
  state: { closed: boolean },
  log: Logger,
  inbound?: InboundPolicy,
): (m: PubSubMessage) => Promise<void> {
  // rawPayload: the app gets the message's bytes as published (a CloudEvent wraps them for routing only)
  const read = isRawPayload(info.metadata) ? rawEvent : readEvent;
  const deadLetter = info.deadLetterTopic;
  const toDeadLetter = (event: CloudEvent) => {
    // the message as received, straight to the component (as the reference runtime does): its
    // CloudEvent still names the topic it failed on, and the dead-letter subscription is told
    // its own topic (MessageTarget.send's `sub`)
    const raw = rawPayloadOf(event);
    return raw ? pubsub.publish(deadLetter, raw.data, {}, raw.contentType) : pubsub.publish(deadLetter, Buffer.from(eventJson(event)), {}, CLOUDEVENT_CONTENT_TYPE);
  };
  /** Not delivered at all (expired, no rule): the dead-letter topic gets it if it can, the message is acknowledged anyway. */
  const discarded = async (event: CloudEvent, why: string) => {
    log.debug({ id: event.id, topic: info.topic }, `${why}: dropped`);
    if (!deadLetter || state.closed) return;
    try {
      await toDeadLetter(event);
      log.warn({ id: event.id, topic: info.topic, deadLetterTopic: deadLetter }, `${why}: message sent to the dead-letter topic`);
    } catch (e) {
      log.warn({ id: event.id, topic: info.topic, deadLetterTopic: deadLetter }, `${why}; sending it to the dead-letter topic failed, dropped: ${(e as Error).message}`);
    }
  };
  return async (m) => {
    const event = read(m.data, { topic: info.topic, pubsubname: info.pubsubname, contentType: m.contentType });
    if (expired(event)) return discarded(event, 'message expired (ttlInSeconds) before delivery');
    const path = route(rules, event);
    if (path === undefined) return discarded(event, 'no routing rule matches the message');
    // the first attempt directly (the usual SUCCESS needs no retry closure); an event that expires
    // while it is being retried is not offered again
    let lapsed = false;
    let outcome: Outcome;
    const resilient = inbound?.policy();
    if (resilient) {
      outcome = await deliverUnder(resilient, inbound!, (signal) => (expired(event) ? ((lapsed = true), Promise.resolve<Outcome>('DROP')) : target.send(path, event, info, signal)), state);
    } else {
      outcome = await target.send(path, event, info);
      if (outcome === 'RETRY') {
        const again = () => (expired(event) ? ((lapsed = true), Promise.resolve<Outcome>('DROP')) : target.send(path, event, info));
        outcome = await withRetries(again, policy, () => state.closed, outcome);
      }
    }
    if (outcome === 'SUCCESS') return;
    if (lapsed) return discarded(event, 'message expired (ttlInSeconds) while it was retried');
    if (outcome === 'DROP') {
      if (!deadLetter) return void log.warn({ id: event.id, topic: info.topic, path }, 'the app dropped the message');
      // the app's answer is final, closing or not: the copy goes now, or the component brings the message back
      try {
        await toDeadLetter(event);
      } catch (e) {
        throw new Error(`message ${event.id} on ${info.pubsubname}/${info.topic} dropped by the app, but sending it to the dead-letter topic "${deadLetter}" failed (the component will deliver it again): ${(e as Error).message}`);
      }
      log.warn({ id: event.id, topic: info.topic, path, deadLetterTopic: deadLetter }, 'the app dropped the message: sent to the dead-letter topic');
      return;
    }
    if (deadLetter && !state.closed) {
      await toDeadLetter(event);
      log.warn({ id: event.id, topic: info.topic, deadLetterTopic: deadLetter }, 'message sent to the dead-letter topic after its retries');
      return;
    }
    throw new Error(`message ${event.id} on ${info.pubsubname}/${info.topic} not taken by the app; the component will deliver it again`);
  };
}

/** A pub/sub's inbound resiliency policy (looked up per message: a reload may change it) and the runner. */
export interface InboundPolicy {
  policy: () => ResolvedPolicy | undefined;
  resiliency: ResiliencyService;
}

class Closing extends Error {}

/** One delivery under a resiliency policy: RETRY is a failed try; a timeout or an open circuit is RETRY in the end. */
async function deliverUnder(policy: ResolvedPolicy, inbound: InboundPolicy, send: (signal?: AbortSignal) => Promise<Outcome>, state: { closed: boolean }): Promise<Outcome> {
  try {
    return await inbound.resiliency.run(
      policy,
      async (signal) => {
        if (state.closed) throw new Closing();
        return send(signal);
      },
      { failureOf: (o) => (o === 'RETRY' ? {} : undefined), isRequestError: (e) => e instanceof Closing },
    );
  } catch {
    return 'RETRY';
  }
}

export class SubscriptionManager {
  private readonly active = new Map<string, Active>();
  private readonly problems = new Map<string, string>();
  private programmatic: SubscriptionInfo[] = [];
  private started = false;
  private closed = false;
  private timer?: NodeJS.Timeout;

  private readonly components: ComponentRegistry;
  private readonly declarative: () => SubscriptionInfo[];
  private readonly app: AppTargets;
  private readonly log: Logger;
  private readonly policy: RetryPolicy;

  private readonly resiliency?: ResiliencyService;

  constructor(components: ComponentRegistry, declarative: () => SubscriptionInfo[], app: AppTargets, log: Logger, policy: RetryPolicy = DEFAULT_RETRY, resiliency?: ResiliencyService) {
    this.resiliency = resiliency;
    this.components = components;
    this.declarative = declarative;
    this.app = app;
    this.log = log;
    this.policy = policy;
    components.onChange(() => void this.reconcile());
  }

  /** The app is reachable: open the subscriptions, and follow changes from now on. */
  start(programmatic: SubscriptionInfo[]): Promise<void> {
    this.programmatic = programmatic;
    this.started = true;
    // resources swap their subscription list on hot updates; a cheap look once a second follows them
    this.timer = setInterval(() => void this.reconcile(), 1000);
    this.timer.unref();
    return this.reconcile();
  }

  /**
   * The subscriptions open on their components, as the metadata lists them: not one before the
   * sidecar subscribed (a publish could be lost), nor one whose pub/sub is not loaded.
   */
  openList(): SubscriptionInfo[] {
    return [...this.active.values()].map((a) => a.info);
  }

  /** Synchronous (subscribing only registers a handler), so two runs can never overlap. */
  reconcile(): Promise<void> {
    if (this.started && !this.closed) this.reconcileOnce();
    return Promise.resolve();
  }

  private desired(): Map<string, SubscriptionInfo> {
    const out = new Map<string, SubscriptionInfo>();
    for (const s of [...this.declarative(), ...this.programmatic]) {
      const key = `${s.pubsubname}/${s.topic}`;
      if (!out.has(key)) out.set(key, s);
    }
    return out;
  }

  private reconcileOnce(): void {
    const want = this.desired();
    for (const [key, a] of this.active) {
      const info = want.get(key);
      const instance = info ? pubsubByName(this.components, info.pubsubname) : undefined;
      if (!info || instance !== a.instance || JSON.stringify(info) !== a.fingerprint) this.stop(key, a);
    }
    for (const [key, info] of want) {
      if (this.active.has(key)) continue;
      const pubsub = pubsubByName(this.components, info.pubsubname);
      if (!pubsub) {
        this.problem(key, `subscription to topic "${info.topic}" waits: pub/sub "${info.pubsubname}" is not loaded`);
        continue;
      }
      let rules: CompiledRule[];
      try {
        rules = compileRules(info.rules);
      } catch (e) {
        this.problem(key, `subscription to ${key} not opened: ${(e as Error).message}`);
        continue;
      }
      const state = { closed: false };
      const bulk = info.bulkSubscribe?.enabled ? this.app.bulk(info, info.bulkSubscribe) : undefined;
      const target: MessageTarget = bulk ?? this.app.single;
      const resiliency = this.resiliency;
      const type = this.components.get(info.pubsubname)?.spec.type ?? 'pubsub';
      const inbound = resiliency && { resiliency, policy: () => resiliency.forComponent(info.pubsubname, type, 'Inbound') };
      const handler = messageHandler(info, rules, pubsub, target, this.policy, state, this.log, inbound);
      try {
        const opened = pubsub.subscribe(info.topic, info.metadata, handler);
        const sub = { close: () => (opened.close(), bulk?.close()) };
        this.active.set(key, { info, fingerprint: JSON.stringify(info), instance: pubsub, sub, state });
        this.problems.delete(key);
        this.log.info({ pubsub: info.pubsubname, topic: info.topic, type: info.type }, 'subscribed');
      } catch (e) {
        this.problem(key, `subscribing to ${key}: ${(e as Error).message}`);
      }
    }
  }

  /** Logs a problem once (the reconcile loop runs every second). */
  private problem(key: string, message: string): void {
    if (this.problems.get(key) === message) return;
    this.problems.set(key, message);
    this.log.warn(message);
  }

  private stop(key: string, a: Active): void {
    a.state.closed = true;
    a.sub.close();
    this.active.delete(key);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    for (const [key, a] of this.active) this.stop(key, a);
  }
}
