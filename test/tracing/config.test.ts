/** spec.tracing of the Configuration: what turns tracing on, and the fields refused with their names. */
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseResources } from '../../sidecar/src/resources/loader.ts';
import { parseTracing, type FieldFail } from '../../sidecar/src/tracing/config.ts';

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
});
