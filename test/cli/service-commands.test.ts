/**
 * The four control-plane commands share one life (shared/service-command.ts): `-h` prints the help
 * and exits 0, a usage error is said with the help and exits 2, a failure to start is one line and
 * exits 1, SIGTERM closes and exits 0. Spawned from the sources as `node cli/rt.ts <command>`.
 * The operator's SIGTERM path needs a cluster (test/operator/leader.test.ts). runServiceCommand's signal
 * handling is tried on a stand-in command too.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INJECTOR_HELP, InjectorUsageError, parseInjectorArgs } from '../../injector/src/main.ts';
import { OPERATOR_HELP, OperatorUsageError, parseOperatorArgs } from '../../operator/src/main.ts';
import { parsePlacementArgs, PLACEMENT_HELP, PlacementUsageError } from '../../placement/src/main.ts';
import { parseSchedulerArgs, SCHEDULER_HELP, SchedulerUsageError } from '../../scheduler/src/main.ts';
import { tempDir } from '../jobs/helpers.ts';

const RT = fileURLToPath(new URL('../../cli/rt.ts', import.meta.url));
/** An address no interface here has (TEST-NET-3): binding to it fails at once. */
const UNBINDABLE = '203.0.113.7';

interface Exit {
  code: number | null;
  signal?: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `rt <args>` with no cluster and no RT_* settings from this shell; with `until`, sends SIGTERM once stdout+stderr match it. */
function rt(args: string[], until?: RegExp): Promise<Exit> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RT_') && k !== 'KUBECONFIG' && k !== 'KUBERNETES_SERVICE_HOST'));
  const proc = spawn(process.execPath, [RT, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...env, NO_COLOR: '1' } });
  let stdout = '';
  let stderr = '';
  let sent = false;
  // once: a second SIGTERM while closing would end the process by the signal (as it should)
  const seen = () => {
    if (!sent && until && until.test(stdout + stderr)) sent = proc.kill('SIGTERM');
  };
  proc.stdout.on('data', (c: Buffer) => ((stdout += c), seen()));
  proc.stderr.on('data', (c: Buffer) => ((stderr += c), seen()));
  // never outlives the test, whatever it printed
  const timer = setTimeout(() => proc.kill('SIGKILL'), 40_000);
  return new Promise((resolve) =>
    proc.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, ...(signal ? { signal } : {}), stdout, stderr });
    }),
  );
}

const COMMANDS = [
  { name: 'scheduler', help: SCHEDULER_HELP, badValue: ['--port', '70000'], badValueSays: /--port must be a whole number from 0 to 65535/ },
  { name: 'placement', help: PLACEMENT_HELP, badValue: ['--heartbeat-timeout', 'soon'], badValueSays: /--heartbeat-timeout must be a duration/ },
  { name: 'operator', help: OPERATOR_HELP, badValue: ['--grpc-port', 'x'], badValueSays: /--grpc-port must be a whole number from 0 to 65535/ },
  { name: 'injector', help: INJECTOR_HELP, badValue: ['--tls-cert-file', 'c'], badValueSays: /--tls-cert-file and --tls-key-file are required/ },
];

describe.each(COMMANDS)('rt $name', ({ name, help, badValue, badValueSays }) => {
  it('-h and `rt help` print the help on stdout and exit 0; an unknown flag or a bad value is said with the help, exit 2', async () => {
    const [h, helpCmd, unknown, bad] = await Promise.all([rt([name, '-h']), rt(['help', name]), rt([name, '--no-such-flag']), rt([name, ...badValue])]);
    for (const r of [h, helpCmd]) expect(r).toEqual({ code: 0, stdout: `${help}\n`, stderr: '' });
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toMatch(new RegExp(`^rt ${name}: Unknown option '--no-such-flag'`));
    expect(bad).toMatchObject({ code: 2, stdout: '' });
    expect(bad.stderr).toMatch(new RegExp(`^rt ${name}: `));
    expect(bad.stderr).toMatch(badValueSays);
    for (const r of [unknown, bad]) expect(r.stderr.endsWith(`\n\n${help}\n`)).toBe(true);
  }, 60_000);
});

describe('a failure to start is one line, exit 1', () => {
  it('for each command', async () => {
    const dir = tempDir('rt-service-commands-');
    try {
      writeFileSync(join(dir.path, 'kubeconfig'), 'not: [a kubeconfig');
      const runs = await Promise.all([
        rt(['scheduler', '--port', '0', '--data-dir', join(dir.path, 'kubeconfig', 'under-a-file'), '--log-level', 'error']),
        rt(['placement', '--port', '0', '--listen-address', UNBINDABLE, '--log-level', 'error']),
        rt(['operator', '--kubeconfig', join(dir.path, 'kubeconfig'), '--log-level', 'error']),
        rt(['injector', '--port', '0', '--listen-address', '127.0.0.1', '--tls-cert-file', join(dir.path, 'none.crt'), '--tls-key-file', join(dir.path, 'none.key'), '--log-level', 'error']),
      ]);
      for (const [i, name] of ['scheduler', 'placement', 'operator', 'injector'].entries()) {
        expect(runs[i], name).toMatchObject({ code: 1, stdout: '' });
        // the command's own words are its last line; before it only what a library logged (grpc-js's "E …"), no stack
        expect(runs[i]!.stderr, name).toMatch(new RegExp(`(^|\\n)rt ${name}: could not start: [^\\n]+\\n$`));
        expect(runs[i]!.stderr, name).not.toMatch(/\n\s+at /);
      }
      expect(runs[2]!.stderr).toMatch(/kubeconfig .*kubeconfig: not YAML/);
    } finally {
      dir.remove();
    }
  }, 60_000);
});

describe('SIGTERM closes and exits 0', () => {
  it('rt scheduler and rt placement (rt injector: test/injector/server.test.ts)', async () => {
    const dir = tempDir('rt-service-commands-');
    try {
      const [scheduler, placement] = await Promise.all([
        rt(['scheduler', '--port', '0', '--data-dir', dir.path, '--log-level', 'info'], /rt scheduler ready/),
        rt(['placement', '--port', '0', '--log-level', 'info'], /rt placement ready/),
      ]);
      expect(scheduler).toMatchObject({ code: 0 });
      expect(placement).toMatchObject({ code: 0 });
    } finally {
      dir.remove();
    }
  }, 60_000);
});

describe('runServiceCommand and signals', () => {
  const SERVICE_COMMAND = fileURLToPath(new URL('../../shared/service-command.ts', import.meta.url));
  /** A command whose start prints "starting", then never ends ('hang') or prints "ready" and resolves; its close prints "closed". */
  function command(start: 'hang' | 'ready'): Promise<Exit> {
    const script = `
      import { runServiceCommand } from ${JSON.stringify(SERVICE_COMMAND)};
      class U extends Error {}
      const start = async () => {
        console.log('starting');
        ${start === 'hang' ? 'await new Promise(() => setInterval(() => {}, 1000));' : ''}
        console.log('ready');
        const serving = setInterval(() => {}, 1000); // what a server's socket does: keeps the process
        return { close: async () => (clearInterval(serving), console.log('closed')) };
      };
      process.exitCode = await runServiceCommand({ name: 'x', help: 'h', parse: () => ({}), usageError: U, start }, []);`;
    const proc = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let sent = false;
    proc.stdout.on('data', (c: Buffer) => {
      stdout += c;
      if (!sent && stdout.includes(start === 'hang' ? 'starting' : 'ready')) sent = proc.kill('SIGTERM');
    });
    proc.stderr.on('data', (c: Buffer) => (stderr += c));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
    return new Promise((resolve) =>
      proc.once('close', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr });
      }),
    );
  }

  it('a signal once started closes and exits 0', async () => {
    expect(await command('ready')).toMatchObject({ code: 0, signal: null, stdout: 'starting\nready\nclosed\n' });
  }, 40_000);

  it('a signal while still starting ends the process as the signal does (a start may wait for long)', async () => {
    expect(await command('hang')).toMatchObject({ code: null, signal: 'SIGTERM', stdout: 'starting\n' });
  }, 40_000);
});

describe('the parsers answer any argv with options, help or their usage error', () => {
  const flags = (help: string) => [...help.matchAll(/(?<=\s)--[a-z-]+/g)].map((m) => m[0]);
  const parsers = [
    { parse: (a: string[]) => parseSchedulerArgs(a), usageError: SchedulerUsageError, help: SCHEDULER_HELP },
    { parse: (a: string[]) => parsePlacementArgs(a), usageError: PlacementUsageError, help: PLACEMENT_HELP },
    { parse: (a: string[]) => parseOperatorArgs(a, {}), usageError: OperatorUsageError, help: OPERATOR_HELP },
    { parse: (a: string[]) => parseInjectorArgs(a, {}), usageError: InjectorUsageError, help: INJECTOR_HELP },
  ];
  it.each(parsers.map((p, i) => ({ ...p, name: COMMANDS[i]!.name })))('$name', ({ parse, usageError, help }) => {
    const word = fc.oneof(fc.constantFrom(...flags(help), '-h', '--', '-x'), fc.string({ maxLength: 12 }), fc.constantFrom('0', '65536', 'true', '1s', '/nonexistent'));
    fc.assert(
      fc.property(fc.array(word, { maxLength: 8 }), (argv) => {
        try {
          const o = parse(argv);
          expect(o === 'help' || typeof o === 'object').toBe(true);
        } catch (e) {
          expect(e).toBeInstanceOf(usageError);
        }
      }),
      { numRuns: 300 },
    );
  });
});
