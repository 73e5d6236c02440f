/**
 * The sidecar flags parser: our flags, the reference sidecar's aliases and Go flag syntax. Bad
 * input is a UsageError with a message, never another exception.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UsageError, parseSidecarArgs } from '../../cli/options.ts';
import { parseByteSize } from '../../cli/reference-flags.ts';

describe('sidecar flags', () => {
  it('maps the reference aliases onto our options', () => {
    const p = parseSidecarArgs(
      ['-app-id', 'a', '--dapr-http-port=3600', '--dapr-grpc-port', '50010', '--dapr-listen-addresses', '127.0.0.1,::1', '--dapr-http-max-request-size', '8', '--components-path', 'x', '--resources-path', 'y', '--enable-metrics=false', '--log-as-json=true', '--app-health-probe-interval', '7', '--app-health-probe-timeout', '250'],
      false,
    );
    expect(p.options).toMatchObject({
      appId: 'a',
      httpPort: 3600,
      grpcPort: 50010,
      listenAddress: '127.0.0.1',
      maxRequestBodyBytes: 8 * 1024 * 1024,
      resourcesPaths: ['y', 'x'],
      enableMetrics: false,
      logAsJson: true,
      appHealthProbeIntervalMs: 7000,
      appHealthProbeTimeoutMs: 250,
    });
    expect(p.warnings).toEqual([expect.stringContaining('rt listens on one address; using 127.0.0.1, not ::1')]);
  });

  it('reads --placement-host-address (or RT_PLACEMENT_HOST_ADDRESS) as a list, as the scheduler\'s', () => {
    expect(parseSidecarArgs(['--app-id', 'a', '--placement-host-address', 'p-0:50005, p-1:50005'], false).options.placementAddresses).toEqual(['p-0:50005', 'p-1:50005']);
    expect(parseSidecarArgs(['--app-id', 'a'], false).options.placementAddresses).toBeUndefined();
  });

  it('an explicit --log-as-json=false wins over the env and the kubernetes default', () => {
    const p = parseSidecarArgs(['--app-id', 'a', '--mode', 'kubernetes', '--log-as-json=false'], false);
    expect(p.options.logAsJson).toBe(false);
    expect(parseSidecarArgs(['--app-id', 'a', '--log-as-json'], false).options.logAsJson).toBe(true);
  });

  it('our own flag wins over its alias; --max-body-size takes sizes', () => {
    const p = parseSidecarArgs(['--app-id', 'a', '--http-port', '1', '--dapr-http-port', '2', '--max-body-size', '16Mi'], false);
    expect(p.options.httpPort).toBe(1);
    expect(p.options.maxRequestBodyBytes).toBe(16 * 1024 * 1024);
    expect(() => parseSidecarArgs(['--app-id', 'a', '--max-body-size', '0'], false)).toThrow(UsageError);
    expect(() => parseSidecarArgs(['--app-id', 'a', '--log-level', 'loud'], false)).toThrow(/--log-level must be one of/);
  });

  it('parses sizes', () => {
    expect(parseByteSize('4Mi')).toBe(4 * 1024 * 1024);
    expect(parseByteSize('4MB')).toBe(4_000_000);
    expect(parseByteSize('512')).toBe(512);
    expect(parseByteSize('1.5Ki')).toBe(1536);
    expect(parseByteSize('4 parsecs')).toBeUndefined();
    fc.assert(fc.property(fc.string(), (s) => {
      const n = parseByteSize(s);
      return n === undefined || (Number.isSafeInteger(n) && n >= 0);
    }));
  });

  it('any argument list is parsed or refused with a UsageError', () => {
    const word = fc.oneof(fc.constantFrom('--app-id', '-app-id', '--dapr-http-port', '--max-body-size', '--enable-metrics=false', '--log-as-json=maybe', '--resources-path', '--placement-host-address', '--', '-h'), fc.string({ maxLength: 12 }));
    fc.assert(
      fc.property(fc.array(word, { maxLength: 8 }), (argv) => {
        try {
          parseSidecarArgs(argv, false);
        } catch (e) {
          if (!(e instanceof UsageError)) throw e;
        }
      }),
    );
  });
});
