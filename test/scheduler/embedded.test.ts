/**
 * The embedded scheduler's store file name (scheduler/src/embedded.ts): its hash is SHA-256 from
 * @noble/hashes, so that node:crypto stays unloaded in an idle sidecar; the names must stay what
 * node:crypto made them, or a sidecar would not find the jobs an earlier rt stored.
 */
import { createHash } from 'node:crypto';
import { basename, dirname } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { embeddedStorePath } from '../../scheduler/src/embedded.ts';

describe('embeddedStorePath', () => {
  it('names the file as before: <namespace>.<app id>.<first 8 hex digits of SHA-256>.sqlite', () => {
    expect(embeddedStorePath('/data', 'default', 'checkout')).toBe(`/data/scheduler/default.checkout.${createHash('sha256').update('default\u0000checkout').digest('hex').slice(0, 8)}.sqlite`);
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 80 }), (namespace, appId) => {
        const file = embeddedStorePath('/d', namespace, appId);
        expect(dirname(file)).toBe('/d/scheduler');
        const hash = createHash('sha256').update(`${namespace}\u0000${appId}`).digest('hex').slice(0, 8);
        expect(basename(file).endsWith(`.${hash}.sqlite`)).toBe(true);
        expect(basename(file)).not.toMatch(/[^A-Za-z0-9._-]/);
      }),
      { numRuns: 500 },
    );
  });
});
