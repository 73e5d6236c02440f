/** spec.tracing of the Configuration: what turns tracing on, and the fields refused with their names. */
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseResources } from '../../sidecar/src/resources/loader.ts';
import { otelHeaders, otelTimeout, parseTracing, type FieldFail } from '../../sidecar/src/tracing/config.ts';

const fail: FieldFail = (field, message) => {
  throw new Error(`${field} ${message}`);
};
const configuration = (tracing: unknown) => stringify({ apiVersion: 'dapr.io/v1alpha1', kind: 'Configuration', metadata: { name: 'tracing' }, spec: { tracing } });
const opts = { appId: 'a', namespace: 'default' };

describe('spec.tracing', () => {
  it('reads the reference runtime example (gRPC, host:port)', () => {
    expect(parseTracing({ samplingRate: '1', otel: { endpointAddress: 'otel-collector:4317', isSecure: false, protocol: 'grpc' } }, fail)).toEqual({
      samplingRate: 1,
      stdout: false,
      otel: { url: 'http://otel-collector:4317', protocol: 'grpc' },
    });
  });

  it('HTTP adds /v1/traces unless the address names a path; isSecure makes it https; grpc is the default protocol', () => {
    expect(parseTracing({ samplingRate: '0.5', otel: { endpointAddress: 'c:4318', isSecure: true, protocol: 'http' } }, fail)?.otel).toEqual({ url: 'https://c:4318/v1/traces', protocol: 'http' });
    expect(parseTracing({ samplingRate: '0.5', otel: { endpointAddress: 'http://c:4318/custom', protocol: 'http' } }, fail)?.otel).toEqual({ url: 'http://c:4318/custom', protocol: 'http' });
    expect(parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4317', isSecure: 'true' } }, fail)?.otel).toEqual({ url: 'https://c:4317', protocol: 'grpc' });
  });

  it('is off when absent, when samplingRate is absent or "0"', () => {
    expect(parseTracing(undefined, fail)).toBeUndefined();
    expect(parseTracing({ otel: { endpointAddress: 'c:4317' } }, fail)).toBeUndefined();
    expect(parseTracing({ samplingRate: '0', otel: { endpointAddress: 'c:4317' } }, fail)).toBeUndefined();
    expect(parseTracing({ samplingRate: '0.000' }, fail)).toBeUndefined();
  });

  it('takes any rate in [0, 1] as written, number or string', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1, noNaN: true }), fc.boolean(), (rate, asNumber) => {
        const got = parseTracing({ samplingRate: asNumber ? rate : String(rate), stdout: true }, fail);
        if (rate === 0) expect(got).toBeUndefined();
        else expect(got).toEqual({ samplingRate: rate, stdout: true, otel: undefined });
      }),
    );
  });

  it('refuses, naming the field, any samplingRate that is not a number in [0, 1]', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string().filter((s) => !/^\s*(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?\s*$/i.test(s) && s !== ''), fc.double({ min: 1.0000001, noNaN: true }).map(String), fc.constantFrom('-0.5', '2', 'NaN', 'Infinity', '1e3', 'one')), (rate) => {
        expect(() => parseTracing({ samplingRate: rate }, fail)).toThrow(/^spec\.tracing\.samplingRate /);
      }),
    );
  });

  it('refuses a bad protocol, a missing endpoint, a bad isSecure, credentials in the address, a bad zipkin address', () => {
    expect(() => parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4317', protocol: 'thrift' } }, fail)).toThrow(/^spec\.tracing\.otel\.protocol must be grpc or http/);
    expect(() => parseTracing({ samplingRate: '1', otel: { protocol: 'grpc' } }, fail)).toThrow(/^spec\.tracing\.otel\.endpointAddress is required/);
    expect(() => parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4317', isSecure: 'yes' } }, fail)).toThrow(/^spec\.tracing\.otel\.isSecure/);
    expect(() => parseTracing({ samplingRate: '1', otel: { endpointAddress: 'http://u:p@c:4317' } }, fail)).toThrow(/credentials/);
    expect(() => parseTracing({ samplingRate: '1', otel: { endpointAddress: 'ftp://c:21' } }, fail)).toThrow(/^spec\.tracing\.otel\.endpointAddress/);
    expect(() => parseTracing({ samplingRate: '1', zipkin: {} }, fail)).toThrow(/^spec\.tracing\.zipkin\.endpointAddress is required/);
    expect(() => parseTracing({ samplingRate: '1', zipkin: { endpointAddress: 'z:9411' } }, fail)).toThrow(/^spec\.tracing\.zipkin\.endpointAddress must be an http\(s\) URL/);
    expect(() => parseTracing({ samplingRate: '1', zipkin: { endpointAddress: 'http://u:p@z:9411/api/v2/spans' } }, fail)).toThrow(/^spec\.tracing\.zipkin\.endpointAddress must not hold credentials/);
    expect(() => parseTracing({ samplingRate: '1', zipkin: 'http://z:9411' }, fail)).toThrow(/^spec\.tracing\.zipkin must be a mapping/);
    expect(() => parseTracing('on', fail)).toThrow(/^spec\.tracing must be a mapping/);
  });

  it("reads zipkin.endpointAddress as the reference's Zipkin exporter takes it (a whole URL), beside otel or alone", () => {
    expect(parseTracing({ samplingRate: '1', zipkin: { endpointAddress: 'http://localhost:9411/api/v2/spans' } }, fail)).toEqual({ samplingRate: 1, stdout: false, zipkin: { url: 'http://localhost:9411/api/v2/spans' } });
    expect(parseTracing({ samplingRate: '0.5', otel: { endpointAddress: 'c:4317' }, zipkin: { endpointAddress: 'https://z.example/api/v2/spans' } }, fail)).toMatchObject({ otel: { url: 'http://c:4317' }, zipkin: { url: 'https://z.example/api/v2/spans' } });
    expect(parseTracing({ samplingRate: '0', zipkin: { endpointAddress: 'http://localhost:9411/api/v2/spans' } }, fail)).toBeUndefined();
  });

  it('a Configuration with a bad samplingRate is refused at load with its file and field', () => {
    expect(() => parseResources(configuration({ samplingRate: 'often' }), 'config.yaml', opts)).toThrow(/config\.yaml.*spec\.tracing\.samplingRate/s);
    expect(parseResources(configuration({ samplingRate: '1', otel: { endpointAddress: 'c:4317' } }), 'config.yaml', opts).configuration?.spec.tracing).toBeDefined();
  });

  it('otel.headers: the OTEL_EXPORTER_OTLP_HEADERS string or a list of { name, value }; otel.timeout: ms or a duration', () => {
    const otel = (o: Record<string, unknown>) => parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4318', protocol: 'http', ...o } }, fail)?.otel;
    expect(otel({ headers: 'X-Key=a%2Cb, x-team=obs', timeout: 2500 })).toEqual({ url: 'http://c:4318/v1/traces', protocol: 'http', headers: { 'x-key': 'a,b', 'x-team': 'obs' }, timeoutMillis: 2500 });
    expect(otel({ headers: [{ name: 'X-Key', value: 'v' }, { name: 'n', value: 7 }], timeout: '10s' })).toMatchObject({ headers: { 'x-key': 'v', n: '7' }, timeoutMillis: 10_000 });
    expect(otel({ headers: [], timeout: '' })).toEqual({ url: 'http://c:4318/v1/traces', protocol: 'http' });
    for (const [t, ms] of [['500ms', 500], ['2m', 120_000], ['3000', 3000], [' 1s ', 1000]] as const) expect(otelTimeout(t, fail)).toBe(ms);
  });

  it('refuses bad otel.headers and otel.timeout naming the field, never repeating a header value', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ headers: 'k=S3CR3T-1,S3CR3T-2' }, /^spec\.tracing\.otel\.headers must be name=value pairs joined by commas: entry 2 of 2/],
      [{ headers: { k: 'S3CR3T-1' } }, /^spec\.tracing\.otel\.headers must be "name=value,…" or a list/],
      [{ headers: ['S3CR3T-1'] }, /^spec\.tracing\.otel\.headers\[0\] must be a mapping/],
      [{ headers: [{ name: 'bad name', value: 'S3CR3T-1' }] }, /^spec\.tracing\.otel\.headers\[0\]\.name must be a valid HTTP header name/],
      [{ headers: [{ name: 'k', value: 'S3CR3T\r\nx: 1' }] }, /^spec\.tracing\.otel\.headers\[0\]\.value \(k\) must be a string of printable ASCII/],
      [{ headers: [{ name: 'k', value: { a: 'S3CR3T' } }] }, /^spec\.tracing\.otel\.headers\[0\]\.value/],
      [{ headers: [{ name: 'k', secretKeyRef: { name: 's', key: 'S3CR3T' } }] }, /^spec\.tracing\.otel\.headers\[0\]\.secretKeyRef is not supported/],
      [{ protocol: 'grpc', headers: [{ name: 'k-bin', value: 'S3CR3T' }] }, /^spec\.tracing\.otel\.headers\[0\] k-bin: a name ending in -bin/],
      [{ timeout: 0 }, /^spec\.tracing\.otel\.timeout must be a whole number of milliseconds above 0 or a duration/],
      [{ timeout: '1.5s' }, /^spec\.tracing\.otel\.timeout must be/],
      [{ timeout: -5 }, /^spec\.tracing\.otel\.timeout must be/],
      [{ timeout: true }, /^spec\.tracing\.otel\.timeout must be/],
      [{ timeout: '10h' }, /^spec\.tracing\.otel\.timeout must be/],
    ];
    for (const [o, message] of cases) {
      let err: Error | undefined;
      try {
        parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4318', protocol: 'http', ...o } }, fail);
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message, JSON.stringify(o)).toMatch(message);
      expect(err?.message).not.toContain('S3CR3T');
    }
  });

  it('otel.headers as a list round-trips any names and values; anything else is refused, never a 5xx-like throw of another kind (fast-check)', () => {
    const name = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/).filter((n) => !n.toLowerCase().endsWith('-bin'));
    const value = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,30}[\x21-\x7e])?$/);
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(name, value), { selector: ([n]) => n.toLowerCase(), maxLength: 6 }), (pairs) => {
        const got = otelHeaders(pairs.map(([n, v]) => ({ name: n, value: v })), 'grpc', fail);
        expect(got ?? {}).toEqual(Object.fromEntries(pairs.map(([n, v]) => [n.toLowerCase(), v])));
      }),
    );
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (headers, timeout) => {
        try {
          parseTracing({ samplingRate: '1', otel: { endpointAddress: 'c:4317', headers, timeout } }, fail);
        } catch (e) {
          expect((e as Error).message).toMatch(/^spec\.tracing\.otel\.(headers|timeout)/);
        }
      }),
    );
  });
});
