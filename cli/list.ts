/**
 * `rt list`: the apps running on this machine, read from the local registry (`~/.rt/registry`,
 * or under RT_HOME) that every `rt run` / `rt sidecar` writes, dead processes skipped.
 */
import { parseArgs } from 'node:util';
import { listEntries, registryDir, type RegistryEntry } from '../sidecar/src/index.ts';

const HELP = `usage: rt list [-o table|json]

Lists the apps whose sidecars run on this machine (from ${registryDir()}).
  -o, --output FORMAT   table (default) or json`;

export async function listCommand(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { output: { type: 'string', short: 'o' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (e) {
    console.error(`rt list: ${(e as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const format = values.output ?? 'table';
  if (format !== 'table' && format !== 'json') {
    console.error(`rt list: --output must be table or json, got "${format}"`);
    return 2;
  }
  const entries = listEntries();
  if (format === 'json') {
    console.log(JSON.stringify(entries.map(jsonRow), null, 2));
    return 0;
  }
  if (entries.length === 0) {
    console.log('No rt instances found.');
    return 0;
  }
  console.log(table(entries));
  return 0;
}

function jsonRow(e: RegistryEntry) {
  return { appId: e.appId, namespace: e.namespace, httpPort: e.httpPort, grpcPort: e.grpcPort, internalGrpcPort: e.internalGrpcPort, appPort: e.appPort, metricsPort: e.metricsPort, command: e.command ?? '', age: age(e.startedAt), created: e.startedAt, rtPid: e.pid, cliPid: e.cliPid };
}

function table(entries: RegistryEntry[]): string {
  const head = ['APP ID', 'HTTP PORT', 'GRPC PORT', 'APP PORT', 'COMMAND', 'AGE', 'CREATED', 'PID'];
  const rows = entries.map((e) => [e.appId, String(e.httpPort), String(e.grpcPort), String(e.appPort), (e.command ?? '').slice(0, 40), age(e.startedAt), e.startedAt.replace('T', ' ').slice(0, 19), String(e.cliPid ?? e.pid)]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  return [head, ...rows].map((r) => `  ${r.map((c, i) => c.padEnd(widths[i])).join('  ')}`.trimEnd()).join('\n');
}

function age(iso: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
