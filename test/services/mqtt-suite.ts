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
