/**
 * A private Mosquitto (Debian's `mosquitto`) for the MQTT suites: each suite starts its own on a
 * free loopback port with a config and persistence folder of its own, since the suites stop and
 * start their broker (a restart must keep the persistent sessions and their queued messages).
 * `RT_TEST_MOSQUITTO_BIN` names another binary.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.ts';
import { startServerProcess, type StartedServer } from './server-process.ts';

export const MOSQUITTO_BIN = process.env.RT_TEST_MOSQUITTO_BIN || '/usr/sbin/mosquitto';

/** Why no broker can be had here; undefined when the binary is there. */
export function mosquittoMissing(): string | undefined {
  return existsSync(MOSQUITTO_BIN) ? undefined : `${MOSQUITTO_BIN} not found (Debian package mosquitto)`;
}

export interface Mosquitto {
  /** tcp://127.0.0.1:<port> (ssl:// with `tls`), as component metadata `url` takes it. */
  url: string;
  port: number;
  /** The running broker's process id (0 while stopped): for CPU figures. */
  pid(): number;
  /** Ends the broker (SIGTERM: it saves its sessions first) and keeps its folder, for `start()`. */
  stop(): Promise<void>;
  /** Starts it again on the same port and folder (after `stop()`). */
  start(): Promise<void>;
  /** Ends it and removes its folder. */
  close(): Promise<void>;
}

/**
 * Starts a broker: anonymous clients on loopback only, persistence on (written at exit), QoS 0
 * messages queued for offline persistent sessions too; with `tls`, its listener speaks TLS only
 * with that certificate and key (PEM), and with `clientCa` takes only clients with a certificate
 * that CA issued. Throws with the broker's own words when it
 * cannot start; the caller decides whether that fails the suite (requireService).
 */
export async function startMosquitto(opts: { tls?: { cert: string; key: string; clientCa?: string } } = {}): Promise<Mosquitto> {
  const missing = mosquittoMissing();
  if (missing) throw new Error(missing);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rt-mosquitto-'));
  const config = join(dir, 'mosquitto.conf');
  const tls: string[] = [];
  if (opts.tls) {
    writeFileSync(join(dir, 'server.crt'), opts.tls.cert);
    writeFileSync(join(dir, 'server.key'), opts.tls.key, { mode: 0o600 });
    tls.push(`certfile ${join(dir, 'server.crt')}`, `keyfile ${join(dir, 'server.key')}`);
    if (opts.tls.clientCa) {
      writeFileSync(join(dir, 'client-ca.crt'), opts.tls.clientCa);
      tls.push(`cafile ${join(dir, 'client-ca.crt')}`, 'require_certificate true');
    }
  }
  const url = `${opts.tls ? 'ssl' : 'tcp'}://127.0.0.1:${port}`;
  writeFileSync(
    config,
    [
      `listener ${port} 127.0.0.1`,
      ...tls,
      'allow_anonymous true',
      'persistence true',
      `persistence_location ${dir}/`,
      'queue_qos0_messages true',
      'log_dest stderr',
      'log_type error',
      'log_type warning',
      // run as root, mosquitto would switch to its own account, which cannot write the temp folder
      `user ${userInfo().username}`,
      '',
    ].join('\n'),
  );
  let server: StartedServer | undefined;
  const start = async () => {
    // `dirs: []`: the folder outlives one process (close() removes it)
    server = await startServerProcess({ name: 'mosquitto', command: MOSQUITTO_BIN, args: ['-c', config], port, dirs: [], url });
  };
  try {
    await start();
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const stop = async () => {
    await server?.stop();
    server = undefined;
  };
  return {
    url,
    port,
    pid: () => server?.pid ?? 0,
    stop,
    start,
    close: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

