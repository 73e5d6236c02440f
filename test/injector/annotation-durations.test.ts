/**
 * A duration annotation the injector admits is one the sidecar starts with, and the other way
 * round: both read it with shared/duration.ts, so a pod is never admitted only for its sidecar to
 * stop at its flags (cli/options.ts), as "0s" did when the injector had a pattern of its own. A bare
 * number is the one difference: the sidecar's flag takes it in the reference sidecar's unit, the
 * annotation asks for the unit to be written.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSidecarArgs } from '../../cli/options.ts';
import { admit, arg, pod, sidecarOf } from './fixtures.ts';

const FLAGS = ['app-health-probe-interval', 'app-health-probe-timeout'] as const;

/** Whether the sidecar's own flag parsing takes `--<flag>=<value>`. */
function sidecarTakes(flag: string, value: string): boolean {
  try {
    parseSidecarArgs(['--app-id', 'web', `--${flag}=${value}`], false);
    return true;
  } catch {
    return false;
  }
}

/** Go-duration-like text: numbers and units, a sign, blanks around, and some that are not. */
const durationText = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc
    .array(fc.tuple(fc.constantFrom('0', '1', '5', '30', '.5', '1.', '2.25', '1000'), fc.constantFrom('ns', 'us', 'µs', 'ms', 's', 'm', 'h', '', 'd')), { minLength: 1, maxLength: 3 })
    .chain((parts) => {
      const s = parts.map(([n, u]) => n + u).join('');
      return fc.constantFrom(s, `-${s}`, `+${s}`, ` ${s} `);
    }),
);

describe('injector: duration annotations', () => {
  it('0s, 0ms and a negative duration are denied (the sidecar would not start with them)', () => {
    for (const v of ['0s', '0ms', '0', '-5s', 'soon', '5']) {
      const a = admit(pod({ 'rt.io/app-health-probe-interval': v }));
      expect(a.allowed, v).toBe(false);
      expect(a.message).toMatch(/rt\.io\/app-health-probe-interval.*expected a duration such as 5s or 500ms/);
    }
  });

  it('Go durations are admitted and passed to the sidecar as written', () => {
    for (const v of ['3s', '250ms', '1m30s', '1.5s', '1h', '500us']) {
      const a = admit(pod({ 'rt.io/app-health-probe-timeout': ` ${v}` }));
      expect(a.allowed, v).toBe(true);
      expect(arg(sidecarOf(a.pod), 'app-health-probe-timeout')).toBe(v);
    }
  });

  it('admitted exactly when the sidecar takes the flag (a bare number apart)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...FLAGS), durationText, (flag, text) => {
        const a = admit(pod({ [`rt.io/${flag}`]: text }));
        if (a.allowed) {
          const value = arg(sidecarOf(a.pod), flag)!;
          expect(sidecarTakes(flag, value), `${flag}=${JSON.stringify(value)}`).toBe(true);
        } else if (!/^\s*\d+\s*$/.test(text)) {
          expect(sidecarTakes(flag, text.trim()), `${flag}=${JSON.stringify(text)}`).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });
});
