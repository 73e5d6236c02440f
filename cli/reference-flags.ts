/**
 * The reference sidecar's command line, accepted by `rt run` and `rt sidecar` so harnesses,
 * scripts and Helm values written for it work unchanged. Each flag either maps onto one of ours
 * or, when it names something rt does not have, is accepted with a warning that says so.
 * Our own flag names stay the documented ones; these are listed apart in --help.
 */

interface AliasFlag {
  type: 'string' | 'boolean';
  multiple?: boolean;
  /** Our flag that takes the value. */
  target: string;
  /** Turns the reference value into ours; undefined when it is not valid. */
  convert?: (value: string, warnings: string[]) => string | string[] | undefined;
  /** What a valid value looks like, for the usage error. */
  expect?: string;
}

interface IgnoredFlag {
  type: 'string' | 'boolean';
  /** Why it has no effect on rt. */
  ignored: string;
}

export type ReferenceFlag = AliasFlag | IgnoredFlag;

const wholeMegabytes = (v: string): string | undefined => (/^\d+$/.test(v.trim()) && Number(v) > 0 ? `${Number(v)}Mi` : undefined);

export const REFERENCE_FLAG_SPECS: Record<string, ReferenceFlag> = {
  'dapr-http-port': { type: 'string', target: 'http-port' },
  'dapr-grpc-port': { type: 'string', target: 'grpc-port' },
  'dapr-listen-addresses': {
    type: 'string',
    target: 'listen-address',
    convert: (v, warnings) => {
      const all = v.split(',').map((s) => s.trim()).filter(Boolean);
      if (all.length > 1) warnings.push(`--dapr-listen-addresses: rt listens on one address; using ${all[0]}, not ${all.slice(1).join(', ')}`);
      return all[0];
    },
    expect: 'an address such as 127.0.0.1',
  },
  'dapr-http-max-request-size': { type: 'string', target: 'max-body-size', convert: wholeMegabytes, expect: 'a whole number of megabytes' },
  'components-path': { type: 'string', multiple: true, target: 'resources-path' },
  'dapr-internal-grpc-port': { type: 'string', target: 'internal-grpc-port' },
  'dapr-http-read-buffer-size': { type: 'string', ignored: "rt reads request headers up to Node's own limit (16 KiB)" },
  'read-buffer-size': { type: 'string', ignored: "rt reads request headers up to Node's own limit (16 KiB)" },
  'dapr-public-port': { type: 'string', ignored: 'health endpoints are served on the HTTP API port' },
  'dapr-public-listen-address': { type: 'string', ignored: 'health endpoints are served on the HTTP API port' },
  'enable-api-logging': { type: 'boolean', ignored: 'rt logs API calls at --log-level debug' },
  'enable-profiling': { type: 'boolean', ignored: 'rt has no profiling endpoint; use node --inspect' },
  'profile-port': { type: 'string', ignored: 'rt has no profiling endpoint; use node --inspect' },
  'sentry-address': { type: 'string', target: 'identity-issuer-address' },
  'dapr-graceful-shutdown-seconds': { type: 'string', ignored: 'rt lets in-flight requests finish on SIGTERM without a fixed bound' },
  'dapr-block-shutdown-duration': { type: 'string', ignored: 'rt does not delay its shutdown for the app' },
  'unix-domain-socket': { type: 'string', ignored: 'rt serves its APIs on TCP ports only' },
};

/** parseArgs' view of the flags above. */
export const REFERENCE_FLAGS: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = Object.fromEntries(
  Object.entries(REFERENCE_FLAG_SPECS).map(([name, spec]) => [name, 'multiple' in spec && spec.multiple ? { type: spec.type, multiple: true } : { type: spec.type }]),
);

export const REFERENCE_HELP = `the reference sidecar's flags are accepted too:
  --dapr-http-port, --dapr-grpc-port        = --http-port, --grpc-port
  --dapr-listen-addresses A                 = --listen-address (the first address)
  --dapr-http-max-request-size MB           = --max-body-size <MB>Mi
  --components-path DIR                     = --resources-path (repeatable)
  flags of things rt does not have are accepted with a warning that says so:
${wrap(
  Object.keys(REFERENCE_FLAG_SPECS)
    .filter((k) => 'ignored' in REFERENCE_FLAG_SPECS[k])
    .map((k) => `--${k}`),
)}
  A single dash (-app-id) and --flag=true|false work as in the reference CLI.`;

function wrap(words: string[]): string {
  const lines: string[] = [];
  let line = ' ';
  for (const w of words) {
    if (line.length + w.length > 96) {
      lines.push(line);
      line = ' ';
    }
    line += ` ${w}`;
  }
  return [...lines, line].join('\n');
}

/**
 * Go's flag syntax, which the reference CLI uses: a single dash before a long name, and
 * `--flag=true|false` for booleans. Rewritten to what parseArgs takes; stops at `--`.
 */
export function normaliseReferenceArgs(argv: string[], known: Record<string, { type: string }>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      out.push(...argv.slice(i));
      break;
    }
    // metrics are on unless --disable-metrics: the reference's --enable-metrics[=bool] maps onto it
    const metrics = /^--?enable-metrics(?:=(true|false))?$/i.exec(a);
    if (metrics) {
      if (metrics[1]?.toLowerCase() === 'false') out.push('--disable-metrics');
      continue;
    }
    let arg = /^-[a-z][a-z0-9-]+(=|$)/.test(a) && known[a.slice(1).split('=')[0]] ? `-${a}` : a;
    const m = /^--([a-z0-9-]+)=(true|false)$/i.exec(arg);
    if (m && known[m[1]]?.type === 'boolean') {
      // parseArgs takes an explicit false as --no-<flag> (allowNegative)
      if (m[2].toLowerCase() === 'false') {
        out.push(`--no-${m[1]}`);
        continue;
      }
      arg = `--${m[1]}`;
    }
    out.push(arg);
  }
  return out;
}

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1000,
  kb: 1000,
  ki: 1024,
  kib: 1024,
  m: 1000 ** 2,
  mb: 1000 ** 2,
  mi: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1000 ** 3,
  gb: 1000 ** 3,
  gi: 1024 ** 3,
  gib: 1024 ** 3,
};

/** "16Mi", "4MB", "4M", "1048576" → bytes (Kubernetes quantities and the usual suffixes). */
export function parseByteSize(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (!m) return undefined;
  const unit = UNITS[m[2].toLowerCase()];
  if (unit === undefined) return undefined;
  const n = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(n) ? n : undefined;
}
