/**
 * The operator's check of a Component (operator/src/check.ts), without a cluster: a built-in
 * type's metadata is checked by the component's declaration, as the sidecar decodes it, with the
 * decoder's message; values the operator cannot read (secretKeyRef, envRef, templates) count as
 * set. A property ties the verdict to decodeMetadata, so the operator and the sidecar cannot drift.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ComponentObject, MetadataEntry } from '../../crds/types.ts';
import { validateResource } from '../../crds/validate.ts';
import { checkComponent } from '../../operator/src/check.ts';
import { acceptedText, decodeMetadata, fieldOfKey } from '../../sidecar/src/components/metadata/decode.ts';
import { DECLARATIONS, declarationsOf } from '../../sidecar/src/components/metadata/declarations.ts';

const component = (type: string, metadata: MetadataEntry[]): ComponentObject => ({
  apiVersion: 'rt.io/v1alpha1',
  kind: 'Component',
  metadata: { name: 'c', namespace: 'ns' },
  spec: { type, version: 'v1', metadata },
});
const v = (name: string, value: string | number): MetadataEntry => ({ name, value });
const ref = (name: string): MetadataEntry => ({ name, secretKeyRef: { name: 'secret', key: name } });
const check = (type: string, ...md: MetadataEntry[]) => checkComponent(component(type, md));

/** The message decodeMetadata throws for `md` under `type`'s declarations. */
function decoderMessage(type: string, md: Record<string, string>): string {
  try {
    for (const d of declarationsOf(type)) decodeMetadata(d, md);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('decoded without error');
}

const SFTP = [v('rootPath', '/'), v('address', 'h:22'), v('username', 'u')];
const OUTPUT = [v('accessKey', 'k'), v('topicEndpoint', 'https://t.example/api/events')];

describe('checkComponent: metadata by the declarations', () => {
  it('accepts a valid component, and keys nobody declared', () => {
    expect(check('state.redis', v('redisHost', 'h:6379'), v('redisDB', 2), v('somethingElse', 'whatever'))).toEqual({ ready: true, reason: 'Valid', message: 'state.redis component is valid' });
    expect(check('state.in-memory', v('anything', 'x')).reason).toBe('Valid');
  });

  it('refuses a missing required field with the decoder\'s message, and finds it under any spelling or alias', () => {
    const missing = check('state.sqlite', v('tableName', 't'));
    expect(missing).toMatchObject({ ready: false, reason: 'Invalid' });
    expect(missing.message).toBe(`spec.metadata: ${decoderMessage('state.sqlite', { tableName: 't' })}`);
    expect(missing.message).toMatch(/^spec\.metadata: metadata field "connectionString" is required/);
    expect(check('state.sqlite', v('url', ':memory:')).reason).toBe('Valid');
    expect(check('state.sqlite', v('CONNECTIONSTRING', ':memory:')).reason).toBe('Valid');
    expect(check('state.redis', v('RedisHost', 'h:6379')).reason).toBe('Valid');
    // blank is unset
    expect(check('state.redis', v('redisHost', '  ')).message).toMatch(/"redisHost" is required/);
  });

  it('refuses a bad boolean, duration or integer with the decoder\'s message, naming the key as written', () => {
    const cases: [string, MetadataEntry[], RegExp][] = [
      ['state.redis', [v('redisHost', 'h'), v('EnableTLS', 'ture')], /metadata field "EnableTLS" "ture" is not a boolean/],
      ['state.sqlite', [v('connectionString', 'x.db'), v('busyTimeout', 'soon')], /metadata field "busyTimeout" "soon" is not a duration/],
      ['state.postgresql', [v('connectionString', 'postgres://x'), v('timeoutInSeconds', '1.5')], /metadata field "timeoutInSeconds" "1.5" is not a duration/],
      ['state.redis', [v('redisHost', 'h'), v('redisDB', '1.5')], /metadata field "redisDB" "1.5" is not a whole number/],
      ['pubsub.redis', [v('redisHost', 'h'), v('concurrency', '0')], /metadata field "concurrency" "0" is out of range: at least 1/],
      ['state.redis', [v('redisHost', 'h'), v('redisType', 'sentinel')], /metadata field "redisType" "sentinel" is not one of "node", "cluster"/],
      // the runtime's own field of every state store, checked first as the registry does
      ['state.sqlite', [v('connectionString', 'x.db'), v('actorStateStore', 'maybe')], /metadata field "actorStateStore" "maybe" is not a boolean/],
    ];
    for (const [type, md, message] of cases) {
      const got = check(type, ...md);
      expect(got.reason, `${type} ${JSON.stringify(md)}`).toBe('Invalid');
      expect(got.message).toMatch(message);
      expect(got.message).toBe(`spec.metadata: ${decoderMessage(type, Object.fromEntries(md.map((e) => [e.name, String(e.value)])))}`);
    }
    // a secret's value is never shown
    expect(check('state.postgresql', v('connectionString', 'postgres://x'), v('url', 'y'), v('maxConns', 'lots')).message).toMatch(/"maxConns" "lots"/);
  });

  it('takes a secretKeyRef value as set and does not decode it; envRef and templates alike', () => {
    expect(check('state.postgresql', ref('connectionString')).reason).toBe('Valid');
    expect(check('state.redis', ref('redisHost'), ref('enableTLS'), ref('redisDB')).reason).toBe('Valid');
    expect(check('state.redis', v('redisHost', 'h'), { name: 'redisDB', envRef: 'REDIS_DB' }).reason).toBe('Valid');
    expect(check('state.redis', v('redisHost', 'h'), v('redisDB', '{env:REDIS_DB}')).reason).toBe('Valid');
    // the reference is resolved after the plain values: it hides a plain one of the same name
    expect(check('state.redis', v('redisHost', 'h'), v('enableTLS', 'ture'), ref('enableTLS')).reason).toBe('Valid');
    // a later plain value wins over an earlier one, as the loader reads them
    expect(check('state.redis', v('redisHost', 'h'), v('redisDB', 'x'), v('redisDB', '3')).reason).toBe('Valid');
  });

  it('checks the state store fields of a pluggable state store too', () => {
    expect(check('state.my-plugin', v('actorStateStore', 'yes'))).toMatchObject({ ready: true, reason: 'Pluggable' });
    expect(check('state.my-plugin', v('actorStateStore', 'ja'))).toMatchObject({ ready: false, reason: 'Invalid', message: expect.stringMatching(/"actorStateStore" "ja" is not a boolean/) });
  });

  it('sftp: password or privateKey (the declaration\'s rule)', () => {
    const none = check('bindings.sftp', ...SFTP);
    expect(none).toMatchObject({ ready: false, reason: 'Invalid' });
    expect(none.message).toBe('spec.metadata: set "password" or "privateKey" (or both): the binding needs a way to log in');
    expect(check('bindings.sftp', ...SFTP, v('password', 'p')).reason).toBe('Valid');
    expect(check('bindings.sftp', ...SFTP, ref('privateKey')).reason).toBe('Valid');
    expect(check('bindings.sftp', ...SFTP.slice(1), v('password', 'p')).message).toMatch(/"rootPath" is required/);
  });

  it('the event-routing binding: the fields of the direction(s) it serves (the declaration\'s rule)', () => {
    for (const type of ['bindings.cloud.eventrouter', 'bindings.azure.eventgrid']) {
      expect(check(type).message).toMatch(/^spec\.metadata: metadata field "direction" is not set and neither side is configured/);
      expect(check(type, ...OUTPUT).reason).toBe('Valid');
      expect(check(type, OUTPUT[0]).message).toMatch(/metadata field "topicEndpoint" is required for the output direction/);
      expect(check(type, v('direction', 'input'), ...OUTPUT).message).toMatch(/metadata fields "cloudTenantId", .* are required for the input direction/);
      // an alias counts: azureClientId is cloudClientId, so input is served and needs the rest
      expect(check(type, ...OUTPUT, v('azureClientId', 'id')).message).toMatch(/"cloudTenantId", "cloudSubscriptionId", "cloudClientSecret", .* are required for the input direction/);
      expect(check(type, ref('accessKey'), v('topicEndpoint', 'https://t.example')).reason).toBe('Valid');
      expect(check(type, ...OUTPUT, v('publishTimeout', '1ms')).message).toMatch(/"publishTimeout" "1ms" is out of range/);
    }
  });

  it('keeps the CRD rules and the type check', () => {
    expect(check('bindings.cloud.eventrouter', v('handshakePort', 8080))).toMatchObject({ reason: 'Invalid', message: expect.stringMatching(/^spec\.metadata\[0\]\.value: handshakePort must be a quoted string/) });
    expect(check('lock.nope')).toMatchObject({ reason: 'Invalid', message: expect.stringMatching(/^spec\.type: unknown type "lock\.nope"/) });
    expect(check('bindings.my-plugin', v('x', 'y')).reason).toBe('Pluggable');
  });
});

describe('checkComponent agrees with decodeMetadata (property)', () => {
  /** Types with declared metadata, and a pluggable state store (the runtime's fields only). */
  const TYPES = [...DECLARATIONS.flatMap((d) => d.types), 'state.my-plugin'];
  const VALUES = ['', ' ', 'x', 'true', 'ture', 'On', '0', '1', '10', '-1', '+7', '1.5', '30s', '500ms', '1h', 'soon', '99999999999999999', 'node', 'Cluster', 'input', 'output', 'Input, output', 'h:6379', 'https://t.example'];
  const variants = (n: string) => [n, n.toLowerCase(), n.toUpperCase()];

  it('is Invalid exactly when the sidecar\'s decoder throws, secret references standing for a valid value', () => {
    const arb = fc.constantFrom(...TYPES).chain((type) => {
      const names = declarationsOf(type).flatMap((d) => Object.entries(d.fields).flatMap(([n, f]) => [n, ...(f.aliases ?? [])].flatMap(variants)));
      const entry = fc.record({ name: fc.constantFrom(...names, 'undeclared'), value: fc.constantFrom(...VALUES), secret: fc.boolean() });
      return fc.tuple(fc.constant(type), fc.uniqueArray(entry, { maxLength: 10, selector: (e) => e.name }));
    });
    fc.assert(
      fc.property(arb, ([type, entries]) => {
        const obj = component(type, entries.map((e) => (e.secret ? ref(e.name) : v(e.name, e.value))));
        const verdict = checkComponent(obj);
        if (validateResource(obj as unknown as Record<string, unknown>).length) {
          expect(verdict.reason).toBe('Invalid'); // a CRD rule (eventSubscriptionName's form), not metadata
          return;
        }
        let decoderError: string | undefined;
        try {
          for (const d of declarationsOf(type)) {
            // as the sidecar has them: the plain values, then the secrets resolved (the key order
            // decides between two spellings of one field)
            const md = Object.fromEntries([
              ...entries.filter((e) => !e.secret).map((e) => [e.name, e.value]),
              ...entries.filter((e) => e.secret).map((e) => {
                const field = fieldOfKey(d, e.name);
                return [e.name, field ? acceptedText(field) : 'x'];
              }),
            ]);
            decodeMetadata(d, md);
          }
        } catch (e) {
          decoderError = (e as Error).message;
        }
        expect(verdict.reason === 'Invalid', `${type} ${JSON.stringify(entries)}: ${verdict.message}`).toBe(decoderError !== undefined);
        if (decoderError !== undefined) expect(verdict.message).toBe(`spec.metadata: ${decoderError}`);
      }),
      { numRuns: 500 },
    );
  });
});
