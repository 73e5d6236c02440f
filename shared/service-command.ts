/**
 * The life of every control-plane command (`rt scheduler`, `rt placement`, `rt operator`,
 * `rt injector`): parse the flags (a usage error is said with the help, exit 2), `-h` prints the
 * help, start (a failure to start is one line, exit 1), serve until SIGTERM or SIGINT, close,
 * exit 0. And the flag reading they share.
 */
import { parseArgs } from 'node:util';

export interface ServiceCommand<O> {
  /** The command's name as typed, e.g. "placement". */
  name: string;
  help: string;
  /** The options, 'help', or a throw of `usageError`. */
  parse(argv: string[]): O | 'help';
  usageError: new (...args: never[]) => Error;
  start(options: O): Promise<{ close(): Promise<void> }>;
}

export async function runServiceCommand<O>(c: ServiceCommand<O>, argv: string[]): Promise<number> {
  let o: O | 'help';
  try {
    o = c.parse(argv);
  } catch (e) {
    if (!(e instanceof c.usageError)) throw e;
    console.error(`rt ${c.name}: ${e.message}\n\n${c.help}`);
    return 2;
  }
  if (o === 'help') {
    console.log(c.help);
    return 0;
  }
  // listening from before start, so that a signal just after the ready line closes what started
  // (without a listener the signal's default action ends the process at once); a signal while
  // still starting ends it as the default action would, since a start may wait long (caches, etcd)
  let started = false;
  let stop = () => {};
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const unlisten = () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (started) return stop();
    unlisten();
    process.kill(process.pid, signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  let running: { close(): Promise<void> };
  try {
    running = await c.start(o);
    started = true;
  } catch (e) {
    unlisten();
    console.error(`rt ${c.name}: could not start: ${(e as Error).message}`);
    return 1;
  }
  await stopped;
  unlisten();
  await running.close();
  return 0;
}

type FlagSpec = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** The spec of flags that take a value (`strings`) and of switches (`booleans`), for parseFlags. */
export function flagSpec(strings: string[], booleans: string[] = []): FlagSpec {
  return Object.fromEntries([...strings.map((n) => [n, { type: 'string' }] as const), ...booleans.map((n) => [n, { type: 'boolean' }] as const)]);
}

/** The command's flags by node:util's parseArgs (strict, plus `-h`/`--help`): their values, or 'help'; an unknown flag throws `usageError`. */
export function parseFlags(argv: string[], flags: FlagSpec, usageError: new (message: string) => Error): Record<string, string | boolean | undefined> | 'help' {
  let v: Record<string, string | boolean | undefined>;
  try {
    v = parseArgs({ args: argv, options: { ...flags, help: { type: 'boolean', short: 'h' } }, strict: true }).values;
  } catch (e) {
    throw new usageError((e as Error).message);
  }
  return v.help ? 'help' : v;
}

/** A whole-number flag from min to max; `def` when absent; else throws `usageError` naming it. */
export function wholeNumberFlag(name: string, text: string | undefined, def: number, min: number, max: number, usageError: new (message: string) => Error): number {
  if (text === undefined) return def;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new usageError(`--${name} must be a whole number from ${min} to ${max}, got "${text}"`);
  return n;
}
