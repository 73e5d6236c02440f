/**
 * One MQTT 3.1.1 connection as both MQTT components use it (MQTT.js, loaded when one connects):
 *
 * - reconnects every second after a loss; with a persistent session (cleanSession false and a
 *   fixed client id) the broker keeps the subscriptions and the QoS 1 messages meanwhile, and
 *   sends again each one that was not acknowledged;
 * - an inbound QoS 1 message is acknowledged (PUBACK) only once the handler resolves. MQTT.js
 *   acknowledges when its `handleMessage` calls back, and handles the next packet only then: its
 *   callback is called at once with an error, which skips its PUBACK, and the PUBACK is written
 *   here when the handler is done. So deliveries run side by side, and the connection's own
 *   traffic (pings, acks of our publishes) never waits for the app;
 * - a message the handler refused is offered again with a growing delay while the connection
 *   lives (the broker would only send it again at the next connection); once the connection is
 *   gone, a persistent session's broker owns it again, so the local copy is dropped.
 */
import type { IClientOptions, IPublishPacket, MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../../../../../shared/backoff.ts';
import { MetadataError } from '../../metadata/decode.ts';

export interface InboundMessage {
  topic: string;
  payload: Buffer;
  qos: number;
  retained: boolean;
}

/** Resolves: the message is taken (acknowledged); rejects: it is offered again later. */
export type InboundHandler = (m: InboundMessage) => Promise<void>;

export interface BrokerAddress {
  protocol: 'mqtt' | 'mqtts';
  host: string;
  port: number;
  username?: string;
  password?: string;
}

const PLAIN = new Set(['tcp:', 'mqtt:']);
const TLS = new Set(['ssl:', 'tls:', 'mqtts:', 'tcps:']);

/** The broker of metadata `url` (the reference's schemes); the URL itself never appears in a message: it may hold a password. */
export function parseBrokerUrl(url: string): BrokerAddress {
  let u: URL;
  try {
    u = new URL(url.trim());
  } catch {
    throw new MetadataError('url', '', 'metadata field "url" is not a URL: use tcp://[user][:password]@host[:port], or ssl://… for TLS');
  }
  const tls = TLS.has(u.protocol);
  if (!tls && !PLAIN.has(u.protocol)) {
    throw new MetadataError('url', '', `metadata field "url" has the scheme "${u.protocol.slice(0, 20)}"; use tcp:// or mqtt:// (plain), ssl://, tls://, mqtts:// or tcps:// (TLS)`);
  }
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!host) throw new MetadataError('url', '', 'metadata field "url" names no host: use tcp://[user][:password]@host[:port]');
  return {
    protocol: tls ? 'mqtts' : 'mqtt',
    host,
    port: u.port ? Number(u.port) : tls ? 8883 : 1883,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
  };
}

/** A PEM block, as the reference checks TLS material at init. */
export function checkPem(field: string, value: string | undefined): void {
  if (value !== undefined && !/-----BEGIN [A-Z0-9 ]+-----[\s\S]+-----END [A-Z0-9 ]+-----/.test(value)) {
    throw new MetadataError(field, '', `metadata field "${field}" is not PEM (a "-----BEGIN …-----" block)`);
  }
}

export interface ConnectionSettings {
  broker: BrokerAddress;
  clientId: string;
  clean: boolean;
  tls: { ca?: string; cert?: string; key?: string };
  /** Waits before a refused message is offered again. */
  redelivery: BackoffPolicy;
  /** Offers after the first one; undefined: until it is taken. */
  maxRedeliveries?: number;
  log: Logger;
}

/** How long a publish waits for the broker's acknowledgement (the reference's 20 s). */
const PUBLISH_TIMEOUT_MS = 20_000;
/** How long init waits for a broker that does not answer yet (the reference's 20 s). */
const CONNECT_TIMEOUT_MS = 20_000;
/** Node's codes for a server certificate that does not verify (node:tls, OpenSSL's names). */
const CERTIFICATE_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER/;
/** MQTT.js' handleMessage callback with this skips its own PUBACK (see the module comment). */
const HELD = new Error('acknowledged when the handler is done');

interface Pending {
  message: InboundMessage;
  messageId?: number;
  /** The connection it came on: a PUBACK goes only there. */
  stream: unknown;
  failures: number;
  timer?: NodeJS.Timeout;
}

export class MqttConnection {
  private client!: MqttClient;
  private closed = false;
  private lost = false;
  private readonly pending = new Set<Pending>();
  private readonly s: ConnectionSettings;
  private readonly handler: InboundHandler;
  private generate!: (p: { cmd: 'puback'; messageId: number }) => Buffer;
  /** Set while the first connect is under way. */
  private abortConnect?: () => void;

  private constructor(s: ConnectionSettings, handler: InboundHandler) {
    this.s = s;
    this.handler = handler;
  }

  /**
   * Connects; rejects when the broker refuses the client or cannot be reached within 20 s.
   * `opening` gets the connection before it is up, so that a close (an init timeout) can stop it.
   */
  static async open(s: ConnectionSettings, handler: InboundHandler, opening?: (c: MqttConnection) => void): Promise<MqttConnection> {
    const c = new MqttConnection(s, handler);
    opening?.(c);
    await c.connect();
    return c;
  }

  private async connect(): Promise<void> {
    const [{ connect }, packet] = await Promise.all([import('mqtt'), import('mqtt-packet')]);
    this.generate = (p) => packet.generate(p);
    const { broker, clientId, clean, tls } = this.s;
    const opts: IClientOptions = {
      protocol: broker.protocol,
      host: broker.host,
      port: broker.port,
      username: broker.username,
      password: broker.password,
      clientId,
      clean,
      protocolVersion: 4,
      reconnectPeriod: 1000,
      connectTimeout: 10_000,
      // MQTT.js names the host for SNI and the certificate check (an IP is checked, not sent)
      ...(broker.protocol === 'mqtts' ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: true } : {}),
    };
    let client: MqttClient;
    try {
      client = connect(opts);
    } catch (e) {
      throw new Error(`MQTT client settings refused: ${(e as Error).message}`);
    }
    this.client = client;
    client.handleMessage = (packet, callback) => this.received(packet, callback);
    const where = `${broker.host}:${broker.port}`;
    await new Promise<void>((resolve, reject) => {
      let last = 'no answer';
      const fail = (why: string) => {
        this.abortConnect = undefined;
        clearTimeout(timer);
        client.off('connect', ok);
        client.end(true);
        reject(new Error(why));
      };
      const timer = setTimeout(() => fail(`cannot connect to the MQTT broker at ${where} within ${CONNECT_TIMEOUT_MS / 1000} s: ${last}`), CONNECT_TIMEOUT_MS);
      const ok = () => {
        this.abortConnect = undefined;
        clearTimeout(timer);
        client.off('error', early);
        resolve();
      };
      const early = (e: Error & { code?: string | number }) => {
        last = e.message;
        // a CONNACK refusal (bad credentials, client id) or a certificate that does not verify
        // does not get better by retrying
        if (typeof e.code === 'number') fail(`the MQTT broker at ${where} refused the connection: ${e.message}`);
        else if (typeof e.code === 'string' && /ALERT/.test(e.code)) fail(`the MQTT broker at ${where} ended the TLS handshake (${e.code}): it wants a client certificate it trusts (clientCert, clientKey)`);
        else if (typeof e.code === 'string' && CERTIFICATE_ERROR.test(e.code)) fail(`the MQTT broker at ${where} presented a certificate that does not verify (${e.code}): set caCert to the CA that issued it`);
      };
      client.once('connect', ok);
      client.on('error', early);
      this.abortConnect = () => fail(`closed while connecting to the MQTT broker at ${where} (${last})`);
    });
    // while reconnecting each failed attempt errors (once a second): said once, by the 'close' below
    client.on('error', (e) => (this.lost ? this.s.log.debug(`MQTT connection ${clientId}: ${e.message}`) : this.s.log.warn(`MQTT connection ${clientId}: ${e.message}`)));
    client.on('close', () => {
      if (this.closed || this.lost) return;
      this.lost = true;
      this.s.log.warn(`MQTT connection ${clientId} to ${where} lost; reconnecting`);
    });
    client.on('connect', (ack) => {
      if (!this.lost) return;
      this.lost = false;
      this.s.log.info(`MQTT connection ${clientId} to ${where} re-established (session ${ack.sessionPresent ? 'resumed' : 'new'})`);
    });
  }

  /** MQTT.js' hook for each inbound PUBLISH (see the module comment). */
  private received(packet: IPublishPacket, callback: (e?: Error) => void): void {
    const message: InboundMessage = { topic: packet.topic, payload: Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload), qos: packet.qos, retained: packet.retain };
    const p: Pending = { message, messageId: packet.qos === 1 ? packet.messageId : undefined, stream: this.client.stream, failures: 0 };
    this.pending.add(p);
    this.deliver(p);
    callback(p.messageId === undefined ? undefined : HELD);
  }

  private deliver(p: Pending): void {
    p.timer = undefined;
    if (this.closed || this.superseded(p)) return void this.pending.delete(p);
    // a handler that throws at once must not throw into MQTT.js' packet loop
    Promise.resolve(p.message).then(this.handler).then(
      () => {
        this.pending.delete(p);
        this.ack(p);
      },
      () => {
        if (this.closed || this.superseded(p)) return void this.pending.delete(p);
        p.failures++;
        const max = this.s.maxRedeliveries;
        if (max !== undefined && p.failures > max) {
          this.pending.delete(p);
          this.s.log.warn({ topic: p.message.topic }, `MQTT message not taken after ${p.failures} attempts: left unacknowledged (the broker sends it again when the session resumes)`);
          return;
        }
        p.timer = setTimeout(() => this.deliver(p), backoffDelay(this.s.redelivery, p.failures - 1));
      },
    );
  }

  /** A QoS 1 message of a persistent session whose connection is gone: the broker sends it again. */
  private superseded(p: Pending): boolean {
    return p.messageId !== undefined && !this.s.clean && p.stream !== this.client.stream;
  }

  private ack(p: Pending): void {
    const stream = this.client.stream;
    if (p.messageId === undefined || p.stream !== stream || !this.client.connected || stream.destroyed) return;
    stream.write(this.generate({ cmd: 'puback', messageId: p.messageId }));
  }

  /** Resolves once the broker has the message (QoS 1, 2) or it is written (QoS 0). */
  async publish(topic: string, payload: Buffer, qos: 0 | 1 | 2, retain: boolean): Promise<void> {
    if (this.closed) throw new Error('the MQTT connection is closed');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the MQTT broker did not acknowledge the message within ${PUBLISH_TIMEOUT_MS / 1000} s`)), PUBLISH_TIMEOUT_MS);
    });
    try {
      await Promise.race([this.client.publishAsync(topic, payload, { qos, retain }), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Subscribes at `qos`; rejects when the broker refuses the filter. */
  async subscribe(filter: string, qos: 0 | 1): Promise<void> {
    const granted = await this.client.subscribeAsync(filter, { qos });
    if (granted.some((g) => g.qos === 128)) throw new Error(`the MQTT broker refused the subscription to "${filter}"`);
  }

  async unsubscribe(filter: string): Promise<void> {
    await this.client.unsubscribeAsync(filter);
  }

  get connected(): boolean {
    return this.client.connected;
  }

  /** Stops redeliveries and disconnects; messages not yet taken stay with the broker (persistent session). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending) clearTimeout(p.timer);
    this.pending.clear();
    if (this.abortConnect) return this.abortConnect();
    const client = this.client;
    if (!client) return;
    // a DISCONNECT once our publishes are acknowledged, when the broker answers; a broker that is
    // away must not hold the close: its socket is dropped after 2 s (nothing reconnects it then)
    const ended = client.endAsync(!client.connected).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((r) => (timer = setTimeout(r, 2000)));
    await Promise.race([ended, late]);
    clearTimeout(timer);
    if (!client.disconnected) client.stream.destroy();
  }
}
