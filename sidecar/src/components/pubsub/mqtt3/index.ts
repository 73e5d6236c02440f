/**
 * pubsub.mqtt3: an MQTT 3.1.1 broker, one connection per component whose client id is
 * `consumerID` (default the app id), as the reference's component has it.
 *
 * - publish at `qos` (0, 1 or 2) with `retain` (a publish's own `retain` metadata wins);
 * - a subscription's topic is an MQTT filter (`+`, `#`, `$share/<group>/…`): a message goes to
 *   the subscription whose filter is its topic, else the first whose filter matches it; the
 *   delivery's `retained` metadata says whether the broker kept it;
 * - subscriptions take QoS 1 when `qos` is 1 or 2 (the app's answer decides the acknowledgement,
 *   so at-least-once), 0 when it is 0;
 * - a QoS 1 message is acknowledged once the app took it; one it did not take is offered again
 *   (1 s doubling to 30 s) while the connection lives, and by the broker after a reconnect when
 *   the session is persistent (cleanSession false);
 * - closing a subscription unsubscribes only with cleanSession true or the subscription's
 *   `unsubscribeOnClose` metadata: a persistent session keeps its place at the broker.
 */
import type { Logger } from 'pino';
import { badRequest } from '../../../http/errors.ts';
import { decodeMetadata, parseBoolean, type Decoded } from '../../metadata/decode.ts';
import type { ComponentContext, ComponentFactory, ComponentSpec } from '../../types.ts';
import type { MessageHandler, PubSub, TopicSubscription } from '../types.ts';
import { checkPem, MqttConnection, parseBrokerUrl, type InboundMessage } from './connection.ts';
import { METADATA } from './metadata.ts';
import { filterProblem, publishTopicProblem, topicMatches } from './topics.ts';

type Settings = Decoded<(typeof METADATA)['fields']>;

const REDELIVERY = { initialMs: 1000, maxMs: 30_000 };

class Mqtt3PubSub implements PubSub {
  private conn?: MqttConnection;
  private md!: Settings;
  private log!: Logger;
  /** Handlers by subscription filter, in the order subscribed. */
  private readonly handlers = new Map<string, MessageHandler>();

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    const broker = parseBrokerUrl(md.url);
    checkPem('caCert', md.caCert);
    checkPem('clientCert', md.clientCert);
    checkPem('clientKey', md.clientKey);
    this.md = md;
    this.log = ctx.log.child({ component: spec.name });
    this.conn = await MqttConnection.open(
      { broker, clientId: md.consumerID ?? ctx.appId, clean: md.cleanSession, tls: { ca: md.caCert, cert: md.clientCert, key: md.clientKey }, redelivery: REDELIVERY, log: this.log },
      (m) => this.dispatch(m),
      (c) => (this.conn = c),
    );
  }

  capabilities(): string[] {
    return [];
  }

  features(): string[] {
    return ['SUBSCRIBE_WILDCARDS'];
  }

  async ping(): Promise<void> {
    if (!this.connection().connected) throw new Error('not connected to the MQTT broker');
  }

  async publish(topic: string, data: Uint8Array, metadata: Record<string, string> = {}): Promise<void> {
    const problem = publishTopicProblem(topic);
    if (problem) throw badRequest('ERR_PUBSUB_PUBLISH_MESSAGE', `cannot publish to MQTT: ${problem}`);
    let retain = this.md.retain;
    if (metadata.retain !== undefined && metadata.retain.trim() !== '') {
      const r = parseBoolean(metadata.retain);
      if (r === undefined) throw badRequest('ERR_PUBSUB_PUBLISH_MESSAGE', `metadata "retain" ${JSON.stringify(metadata.retain.slice(0, 40))} is not a boolean: use true or false`);
      retain = r;
    }
    const payload = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    await this.connection().publish(topic, payload, this.md.qos as 0 | 1 | 2, retain);
  }

  subscribe(topic: string, metadata: Record<string, string>, handler: MessageHandler): TopicSubscription {
    const problem = filterProblem(topic);
    if (problem) throw new Error(problem);
    const conn = this.connection();
    this.handlers.set(topic, handler);
    // the SUBSCRIBE goes out before any later PUBLISH of this connection: the broker routes that one to it
    conn.subscribe(topic, this.md.qos === 0 ? 0 : 1).catch((e: Error) => this.log.error({ topic }, `subscribing: ${e.message}`));
    const unsubscribe = this.md.cleanSession || parseBoolean(metadata.unsubscribeOnClose ?? '') === true;
    return {
      close: () => {
        if (this.handlers.get(topic) !== handler) return;
        this.handlers.delete(topic);
        if (unsubscribe && this.conn) this.conn.unsubscribe(topic).catch((e: Error) => this.log.debug({ topic }, `unsubscribing: ${e.message}`));
      },
    };
  }

  /** The subscription the message is for; none (e.g. between a close and a re-open): offered again later. */
  private dispatch(m: InboundMessage): Promise<void> {
    let handler = this.handlers.get(m.topic);
    if (!handler) {
      for (const [filter, h] of this.handlers) {
        if (topicMatches(filter, m.topic)) {
          handler = h;
          break;
        }
      }
    }
    if (!handler) return Promise.reject(new Error(`no subscription for topic "${m.topic}"`));
    return handler({ topic: m.topic, data: m.payload, metadata: { retained: String(m.retained) } });
  }

  private connection(): MqttConnection {
    if (!this.conn) throw new Error('pubsub.mqtt3 is not initialised');
    return this.conn;
  }

  async close(): Promise<void> {
    this.handlers.clear();
    const c = this.conn;
    this.conn = undefined;
    await c?.close();
  }
}

export const factory: ComponentFactory = () => new Mqtt3PubSub();
