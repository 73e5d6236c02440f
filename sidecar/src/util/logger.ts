/**
 * The one place rt's processes (run, sidecar, scheduler, operator, injector) create their pino
 * logger. Two outputs: one readable line per event for a person at a terminal (time, level,
 * scope, message, then the fields), or JSON lines for log collectors (`--log-as-json`,
 * `RT_LOG_AS_JSON`, and the default in `--mode kubernetes`).
 */
import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger } from 'pino';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

export interface LoggerOptions {
  level?: string;
  /** JSON lines instead of readable ones. */
  json?: boolean;
  /** Fields on every line, e.g. { scope: 'rt.scheduler', app_id }. */
  base?: Record<string, unknown>;
}

/** Whether a log level name is one pino knows (checked at the CLI so a typo is a usage error). */
export function isLogLevel(level: string): boolean {
  return (LOG_LEVELS as readonly string[]).includes(level);
}

/** Reads RT_LOG_AS_JSON: "true"/"1" on, "false"/"0" off, otherwise undefined (the mode decides). */
export function logAsJsonFromEnv(env: NodeJS.ProcessEnv = process.env): boolean | undefined {
  const v = env.RT_LOG_AS_JSON?.trim().toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return undefined;
}

export function createLogger(o: LoggerOptions = {}): Logger {
  const json = o.json ?? logAsJsonFromEnv() ?? false;
  const options = {
    level: o.level ?? 'info',
    base: { ...o.base },
    // a child that sets a key its parent already has (scope) replaces it: one key per line
    onChild: dedupeBindings,
  };
  return json ? pino(options) : pino(options, readableStream());
}

const require = createRequire(import.meta.url);

function readableStream(): DestinationStream {
  // loaded only for the readable output; synchronous so the lines of a crash are not lost
  const { PinoPretty } = require('pino-pretty') as typeof import('pino-pretty');
  return PinoPretty({
    sync: true,
    singleLine: true,
    colorize: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,scope,app_id',
    messageFormat: '{if scope}{scope}{end} {msg}',
  });
}

/** pino serialises child bindings once, as a JSON fragment appended to the parent's. */
function dedupeBindings(child: Logger): void {
  const sym = pino.symbols.chindingsSym as unknown as keyof Logger;
  const chindings = child[sym] as unknown as string;
  if (typeof chindings !== 'string' || chindings.length === 0) return;
  let merged: Record<string, unknown>;
  try {
    merged = JSON.parse(`{${chindings.slice(1)}}`) as Record<string, unknown>;
  } catch {
    return;
  }
  const again = JSON.stringify(merged);
  (child as unknown as Record<symbol, string>)[sym as unknown as symbol] = again === '{}' ? '' : `,${again.slice(1, -1)}`;
}
