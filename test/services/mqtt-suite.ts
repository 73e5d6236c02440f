/**
 * What the MQTT suites share: their broker (one per suite, test/services/mosquitto.ts), started
 * before their tests and closed after them, names no other test uses, and a wait for a condition.
 */
import { afterAll, beforeAll } from 'vitest';
import { startMosquitto, type Mosquitto } from './mosquitto.ts';

/**
 * A suite's broker: started before its tests and, after them, `opened` (the components the suite
 * left open) closed, then the broker. `started` gets the broker.
 */
export function mosquittoForSuite(opened: Set<{ close(): Promise<void> }>, started: (b: Mosquitto) => void): void {
  let broker: Mosquitto | undefined;
  beforeAll(async () => {
    broker = await startMosquitto();
    started(broker);
  });
  afterAll(async () => {
    for (const c of opened) await c.close().catch(() => undefined);
    await broker?.close();
  });
}

let names = 0;
/** A topic or client id no other test of the run uses. */
export function uniqueMqttName(kind: string): string {
  return `rt-test/${kind}/${process.pid}-${++names}`;
}

/** Waits until `check` holds; the error shows `what`. */
export async function until(check: () => boolean, what: () => unknown, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`condition not met in time; got ${JSON.stringify(what())}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * What a persistent session of `clientId` still holds on `topic`: the messages the broker sends
 * when the session resumes, up to a marker this call publishes there. A resumed session's backlog
 * comes first, so "nothing before the marker" means every earlier message was acknowledged, with
 * no wait for something that must not happen.
 */
export async function sessionBacklog(url: string, clientId: string, topic: string, ms = 10_000): Promise<string[]> {
  const { connect } = await import('mqtt');
  const marker = `marker-${clientId}-${Date.now()}`;
  const got: string[] = [];
  // listening from the start: the backlog can come in the same read as the CONNACK
  const client = connect(url, { clientId, clean: false, reconnectPeriod: 0 });
  const seen = new Promise<void>((resolve) =>
    client.on('message', (_topic, payload) => {
      const text = payload.toString();
      if (text === marker) resolve();
      else got.push(text);
    }),
  );
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    await client.subscribeAsync(topic, { qos: 1 });
    await client.publishAsync(topic, marker, { qos: 1 });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([seen, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`the marker did not come back in ${ms} ms; got ${JSON.stringify(got)}`)), ms)))]);
    clearTimeout(timer);
    return got;
  } finally {
    await client.endAsync();
  }
}
