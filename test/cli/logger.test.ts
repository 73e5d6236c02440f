/**
 * The readable log output (shared/logger.ts), in a process of its own as rt writes it to
 * stdout: one line per event with time, level, scope and message, an error's text on its line;
 * pino-pretty is loaded at the first line, so a process with nothing to say never loads it.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const LOGGER = join(import.meta.dirname, '..', '..', 'shared', 'logger.ts');

/** Runs `body` with `log` made by createLogger(opts); prints whether pino-pretty was loaded last. */
function run(opts: object, body: string): { lines: string[]; prettyLoaded: boolean } {
  const script = `
    const { createRequire } = await import('node:module');
    const { createLogger } = await import(${JSON.stringify(LOGGER)});
    const log = createLogger(${JSON.stringify(opts)});
    ${body}
    const loaded = Object.keys(createRequire(${JSON.stringify(LOGGER)}).cache).some((f) => f.includes('/pino-pretty/'));
    console.log('pretty-loaded=' + loaded);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', RT_LOG_AS_JSON: '' }, timeout: 30_000 });
  expect(r.status, r.stderr).toBe(0);
  // the marker is console.log's; the log lines may be flushed before or after it (pino's own destination)
  const lines = r.stdout.trim().split('\n').filter(Boolean);
  const marker = lines.find((l) => l.startsWith('pretty-loaded='));
  expect(marker, r.stdout).toBeDefined();
  return { lines: lines.filter((l) => l !== marker), prettyLoaded: marker === 'pretty-loaded=true' };
}

describe('readable logs', () => {
  it('one line per event: time, level, scope and message, then the fields; an error as its message on the line', () => {
    const r = run({ level: 'info', base: { scope: 'rt.test' } }, `log.info({ port: 3500 }, 'listening'); log.error({ err: Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }) }, 'call failed'); log.debug('not shown');`);
    expect(r.lines).toHaveLength(2);
    expect(r.lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: rt\.test listening \{"port":3500\}$/);
    expect(r.lines[1]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: rt\.test call failed \{"error":"refused \(ECONNREFUSED\)"\}$/);
    expect(r.prettyLoaded).toBe(true);
  });

  it('a process that logs nothing at its level does not load pino-pretty', () => {
    const r = run({ level: 'warn' }, `log.info('below the level');`);
    expect(r.lines).toEqual([]);
    expect(r.prettyLoaded).toBe(false);
    // the first line at the level loads it
    expect(run({ level: 'warn' }, `log.warn('now');`)).toMatchObject({ lines: [expect.stringMatching(/WARN: +now$/)], prettyLoaded: true });
  });

  it('JSON lines load no pino-pretty either', () => {
    const r = run({ level: 'info', json: true }, `log.info('hello');`);
    expect(JSON.parse(r.lines[0]!)).toMatchObject({ level: 30, msg: 'hello' });
    expect(r.prettyLoaded).toBe(false);
  });
});
