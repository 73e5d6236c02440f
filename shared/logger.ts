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
  const level = o.level ?? 'info';
  const options = {
    level,
    base: { ...o.base },
    // a child that sets a key its parent already has (scope) replaces it: one key per line
    onChild: dedupeBindings,
  };
  if (json) return pino(options);
  // readable: an error is its message on the event's line (as `error`); its stack, on lines of
  // its own, only at debug and below
  const verbose = level === 'debug' || level === 'trace';
  return verbose ? pino(options, readableStream()) : pino({ ...options, formatters: { log: errorOnTheLine } }, readableStream());
}

function errorOnTheLine(o: Record<string, unknown>): Record<string, unknown> {
  if (!('err' in o)) return o;
  const { err, ...rest } = o;
  return { ...rest, error: errorText(err) };
}

function errorText(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  const code = (e as NodeJS.ErrnoException).code;
  return `${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${e.message}${code && !e.message.includes(code) ? ` (${code})` : ''}`;
}

const require = createRequire(import.meta.url);

/**
 * The readable output, made at its first line: a process with nothing to say at its level (a
 * sidecar at --log-level warn) never loads pino-pretty and what it requires (tty, worker_threads,
 * colorette): 0.4 MB and a few ms of start.
 */
function readableStream(): DestinationStream {
  let stream: DestinationStream | undefined;
  return { write: (line: string) => (stream ??= prettyStream()).write(line) };
}

function prettyStream(): DestinationStream {
  // loaded only for the readable output; synchronous so the lines of a crash are not lost
  const { PinoPretty } = require('pino-pretty') as typeof import('pino-pretty');
  return PinoPretty({
    sync: true,
    singleLine: true,
    colorize: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,scope,app_id',
    messageFormat: '{if scope}{scope}{end} {msg}',
    // `err` (pino's error key) prints as its stack; `error`, our one-line text, stays on the line
    errorLikeObjectKeys: ['err'],
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
