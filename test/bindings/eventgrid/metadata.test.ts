/** Metadata parsing and validation of the event-routing binding, with fast-check properties. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultSubscriptionName, MetadataError, parseMetadata } from '../../../sidecar/src/components/bindings/eventgrid/metadata.ts';
import { componentYaml, q, startWith } from './helpers.ts';

const SUB = '6b0c5a3e-1f2d-4c3b-9a8e-7d6c5b4a3f21';
const TENANT = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';

const input = (extra: Record<string, string> = {}): Record<string, string> => ({
  direction: 'input',
  cloudTenantId: TENANT,
  cloudSubscriptionId: SUB,
  cloudClientId: 'a1b2c3d4-0000-1111-2222-333344445555',
  cloudClientSecret: 's3cr3t',
  subscriberEndpoint: 'https://hooks.example.com/api/events',
  handshakePort: '9000',
  scope: `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid/topics/t1`,
  ...extra,
});
const output = (extra: Record<string, string> = {}) => ({ accessKey: 'k', topicEndpoint: 'https://t.westus-1.eventgrid.azure.net/api/events', ...extra });
const parse = (md: Record<string, string>, name = 'my-binding', nonStringKeys?: string[]) => parseMetadata(md, { componentName: name, nonStringKeys });
const fieldOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    if (e instanceof MetadataError) return e.field;
    throw e;
  }
  return undefined;
};

describe('event-routing binding metadata', () => {
  it('parses both directions with defaults', () => {
    const md = parse({ ...input({ direction: 'input, output' }), ...output() });
    expect([...md.directions].sort()).toEqual(['input', 'output']);
    expect(md.output).toMatchObject({ accessKey: 'k', publishTimeoutMs: 10_000 });
    expect(md.input).toMatchObject({
      handshakePort: 9000,
      eventSubscriptionName: 'mybinding',
      authorityHost: 'https://login.microsoftonline.com',
      armEndpoint: 'https://management.azure.com',
      scope: `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid/topics/t1`,
    });
  });

  it('infers the direction from the fields present, and accepts the ecosystem field names', () => {
    expect([...parse(output()).directions]).toEqual(['output']);
    const md = parse({ ...input({ direction: '' }), cloudTenantId: '', azureTenantId: TENANT });
    expect([...md.directions]).toEqual(['input']);
    expect(md.input?.tenantId).toBe(TENANT);
    expect(fieldOf(() => parse({}))).toBe('direction');
  });

  it('enforces the required fields per direction, naming them', () => {
    for (const f of ['cloudTenantId', 'cloudSubscriptionId', 'cloudClientId', 'cloudClientSecret', 'subscriberEndpoint', 'handshakePort', 'scope']) {
      const md = input();
      delete md[f];
      expect(() => parse(md)).toThrow(new RegExp(`"${f}" is required for the input direction`));
    }
    expect(() => parse({ direction: 'output', accessKey: 'k' })).toThrow(/"topicEndpoint" is required for the output direction/);
    expect(() => parse({ direction: 'output' })).toThrow(/"accessKey", "topicEndpoint" are required for the output direction/);
    // the output fields are not needed for the input direction and vice versa
    expect(() => parse(input())).not.toThrow();
    expect(() => parse({ ...output(), direction: 'output' })).not.toThrow();
    expect(fieldOf(() => parse(input({ direction: 'sideways' })))).toBe('direction');
  });

  it('validates handshakePort as a quoted port string', () => {
    expect(fieldOf(() => parse(input({ handshakePort: 'abc' })))).toBe('handshakePort');
    expect(fieldOf(() => parse(input({ handshakePort: '0' })))).toBe('handshakePort');
    expect(fieldOf(() => parse(input({ handshakePort: '65536' })))).toBe('handshakePort');
    // a YAML number (once the loader reports value types) is refused with a clear message
    expect(() => parse(input(), 'x', ['handshakePort'])).toThrow(/must be passed as a quoted string/);
  });

  it('accepts the four scope forms and refuses others', () => {
    const ok = [
      `/subscriptions/${SUB}/`,
      `/subscriptions/${SUB}`,
      `/subscriptions/${SUB}/resourceGroups/my-rg_1.(x)`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct1`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid/topics/t1`,
    ];
    for (const scope of ok) expect(parse(input({ scope })).input?.scope).toBe(scope.replace(/\/$/, ''));
    const bad = [
      'subscriptions/x',
      `/subscriptions/not-a-guid/`,
      `/subscriptions/${SUB}/resourceGroups/`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid/topics/t1/extra/x`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.EventGrid/topics/a?b`,
      `https://management.azure.com/subscriptions/${SUB}/`,
    ];
    for (const scope of bad) expect(fieldOf(() => parse(input({ scope }))), scope).toBe('scope');
    // the scope's subscription must be the configured one
    expect(() => parse(input({ scope: '/subscriptions/11111111-2222-3333-4444-555555555555/' }))).toThrow(/but cloudSubscriptionId is/);
  });

  it('validates eventSubscriptionName and derives a default from the component name', () => {
    expect(parse(input({ eventSubscriptionName: 'abc' })).input?.eventSubscriptionName).toBe('abc');
    for (const n of ['ab', 'a-b-c', 'x'.repeat(65), 'ünï']) expect(fieldOf(() => parse(input({ eventSubscriptionName: n })))).toBe('eventSubscriptionName');
    expect(defaultSubscriptionName('orders.in-binding_1')).toBe('ordersinbinding1');
    expect(defaultSubscriptionName('e')).toBe('esub');
    expect(defaultSubscriptionName('x'.repeat(100))).toHaveLength(64);
  });

  it('requires https endpoints without credentials', () => {
    expect(fieldOf(() => parse(input({ subscriberEndpoint: 'http://hooks.example.com/x' })))).toBe('subscriberEndpoint');
    expect(fieldOf(() => parse(input({ subscriberEndpoint: 'hooks.example.com' })))).toBe('subscriberEndpoint');
    expect(fieldOf(() => parse(input({ subscriberEndpoint: 'https://u:p@hooks.example.com/' })))).toBe('subscriberEndpoint');
    expect(fieldOf(() => parse(output({ topicEndpoint: 'http://t.example.com/api/events' })))).toBe('topicEndpoint');
    expect(fieldOf(() => parse(input({ armEndpoint: 'https://arm.example.com/path' })))).toBe('armEndpoint');
    expect(fieldOf(() => parse(output({ publishTimeout: 'soon' })))).toBe('publishTimeout');
    expect(parse(output({ publishTimeout: '2s' })).output?.publishTimeoutMs).toBe(2000);
  });

  it('never fails with anything but a MetadataError, and never echoes the secrets (property)', () => {
    const keys = ['direction', 'accessKey', 'topicEndpoint', 'cloudTenantId', 'cloudSubscriptionId', 'cloudClientId', 'cloudClientSecret', 'subscriberEndpoint', 'handshakePort', 'scope', 'eventSubscriptionName', 'publishTimeout', 'armEndpoint', 'azureAuthorityHost', 'handshakeAddress', 'armPollInterval', 'jwksRefreshCooldown', 'DIRECTION', 'azureClientId', 'other'];
    const value = fc.oneof(fc.string(), fc.constantFrom('input', 'output', 'input, output', '9000', `/subscriptions/${SUB}/`, 'https://x.example.com/', TENANT, SUB, '1s'));
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...keys), value), fc.string(), (md, name) => {
        const secret = 'SECRET-VALUE-xyz';
        const withSecrets = { ...md, accessKey: md.accessKey === undefined ? secret : md.accessKey, cloudClientSecret: secret };
        try {
          const r = parse(withSecrets, name);
          if (r.input) {
            expect(r.input.eventSubscriptionName).toMatch(/^[A-Za-z0-9]{3,64}$/);
            expect(r.input.handshakePort).toBeGreaterThanOrEqual(1);
            expect(r.input.subscriberEndpoint.protocol).toBe('https:');
          }
          if (r.output) expect(r.output.topicEndpoint.protocol).toBe('https:');
          expect(r.directions.size).toBeGreaterThan(0);
        } catch (e) {
          expect(e).toBeInstanceOf(MetadataError);
          expect((e as Error).message).not.toContain(secret);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('names the component and the field when a sidecar loads a bad component', async () => {
    await expect(startWith({ 'bad.yaml': componentYaml('bad-eg', { direction: q('input'), cloudTenantId: q(TENANT) }) })).rejects.toThrow(
      /component "bad-eg" \(bindings\.cloud\.eventrouter\/v1.*"cloudSubscriptionId", .*"scope" are required for the input direction/,
    );
  });
});
