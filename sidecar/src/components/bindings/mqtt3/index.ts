/**
 * bindings.mqtt3, as the reference's binding: two connections to the broker, named after
 * `consumerID` (a broker allows one connection per client id).
 *
 * Output (`<consumerID>-producer`, opened at init): `create` publishes the request's data at QoS 1
 * to its `topic` metadata, else the component's `topic`, with the component's `retain`.
 * Input (`<consumerID>-consumer`, opened when the app is ready): subscribes to `topic` (a filter:
 * `+` and `#` work) at QoS 1 and posts each message to the app's `/<binding name>` with the
 * message's topic in the `topic` metadata. A message is acknowledged once the app answered 2xx;
 * one it refused is offered again `backOffMaxRetries` times 5 s apart (-1: until it is taken),
 * then left unacknowledged, and the broker sends it again when the session resumes
 * (cleanSession false).
 */
import type { Logger } from 'pino';
import { badRequest } from '../../../http/errors.ts';
import { decodeMetadata, type Decoded } from '../../metadata/decode.ts';
import { checkPem, MqttConnection, parseBrokerUrl, type BrokerAddress, type ConnectionSettings } from '../../pubsub/mqtt3/connection.ts';
import { filterProblem, publishTopicProblem } from '../../pubsub/mqtt3/topics.ts';
import {
  bindingDataBytes,
  type BindingRequest,
  type BindingResponse,
  type ComponentContext,
  type ComponentFactory,
  type ComponentSpec,
  type InputBinding,
  type OutputBinding,
} from '../../types.ts';
import { METADATA } from './metadata.ts';

type Settings = Decoded<(typeof METADATA)['fields']>;

/** The reference's constant wait between offers of a refused message. */
const RETRY_EVERY_MS = 5000;

class Mqtt3Binding implements OutputBinding, InputBinding {
  private md!: Settings;
  private name = '';
  private broker!: BrokerAddress;
  private ctx!: ComponentContext;
  private log!: Logger;
  private producer?: MqttConnection;
  private consumer?: MqttConnection;
  private closed = false;

  async init(spec: ComponentSpec, ctx: ComponentContext): Promise<void> {
    const md = decodeMetadata(METADATA, spec.metadata);
    this.broker = parseBrokerUrl(md.url);
    checkPem('caCert', md.caCert);
    checkPem('clientCert', md.clientCert);
    checkPem('clientKey', md.clientKey);
    const problem = filterProblem(md.topic);
    if (problem) throw new Error(`metadata field "topic": ${problem}`);
    if (md.qos !== undefined) ctx.log.warn({ component: spec.name }, 'metadata field "qos" of bindings.mqtt3 is deprecated and ignored: messages go at QoS 1');
    this.md = md;
    this.name = spec.name;
    this.ctx = ctx;
    this.log = ctx.log.child({ component: spec.name });
    if (this.serves('output')) await MqttConnection.open(this.settings('producer'), () => Promise.resolve(), (c) => (this.producer = c));
  }

  private serves(direction: 'input' | 'output'): boolean {
    return this.md.direction.includes(direction);
  }

  private settings(role: 'producer' | 'consumer'): ConnectionSettings {
    const md = this.md;
    return {
      broker: this.broker,
      clientId: `${md.consumerID}-${role}`,
      clean: md.cleanSession,
      tls: { ca: md.caCert, cert: md.clientCert, key: md.clientKey },
      redelivery: { initialMs: RETRY_EVERY_MS, maxMs: RETRY_EVERY_MS },
      maxRedeliveries: md.backOffMaxRetries < 0 ? undefined : md.backOffMaxRetries,
      log: this.log,
    };
  }

  capabilities(): string[] {
    return [...(this.serves('input') ? ['INPUT_BINDING'] : []), ...(this.serves('output') ? ['OUTPUT_BINDING'] : [])];
  }

  operations(): string[] {
    return this.serves('output') ? ['create'] : [];
  }

  async invoke(req: BindingRequest): Promise<BindingResponse> {
    if (!this.producer) throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${this.name}" is configured for the input direction only`);
    if (req.operation !== 'create') throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${this.name}" does not support operation "${req.operation}"; supported: create`);
    const topic = req.metadata.topic || this.md.topic;
    const problem = publishTopicProblem(topic);
    if (problem) throw badRequest('ERR_INVOKE_OUTPUT_BINDING', `binding "${this.name}" cannot publish: ${problem}`);
    await this.producer.publish(topic, Buffer.from(bindingDataBytes(req.data)), 1, this.md.retain);
    return {};
  }

  async start(): Promise<void> {
    if (!this.serves('input') || this.consumer || this.closed) return;
    const deliver = this.ctx.deliverToApp;
    if (!deliver) throw new Error('the input direction needs a sidecar that can deliver events to the app');
    const consumer = await MqttConnection.open(
      this.settings('consumer'),
      async (m) => {
        const reply = await deliver(this.name, { data: m.payload, metadata: { topic: m.topic } });
        if (reply.status < 200 || reply.status >= 300) throw new Error(`the app answered ${reply.status}`);
      },
      (c) => (this.consumer = c),
    );
    await consumer.subscribe(this.md.topic, 1);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([this.producer?.close(), this.consumer?.close()]);
    this.producer = undefined;
    this.consumer = undefined;
  }
}

export const factory: ComponentFactory = () => new Mqtt3Binding();
