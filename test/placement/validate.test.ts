/** What a host may report (placement/src/grpc/validate.ts): any message is a clean report or a HostReportError. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HostReportError, hostReport } from '../../placement/src/grpc/validate.ts';

const text = fc.oneof(fc.string({ maxLength: 300 }), fc.constantFrom('', 'a|b', 'x\u0000y', 'cat', '10.0.0.1:50002', '[::1]:50002', 'host:0', 'host:99999'));
const pbHost = fc.record(
  {
    name: fc.oneof(text, fc.tuple(fc.constantFrom('10.0.0.1', 'pod.ns.svc', '[fe80::1]'), fc.integer({ min: 0, max: 70000 })).map(([h, p]) => `${h}:${p}`)),
    id: text,
    namespace: text,
    pod: text,
    entities: fc.array(text, { maxLength: 5 }),
  },
  { requiredKeys: [] },
);

describe('host reports', () => {
  it('any message gives a checked report or a HostReportError naming the field, nothing else', () => {
    fc.assert(
      fc.property(pbHost, fc.option(fc.record({ trustDomain: fc.constant('td'), namespace: fc.constantFrom('default', 'other'), appId: fc.constantFrom('a', 'b') }), { nil: undefined }), (pb, who) => {
        let r;
        try {
          r = hostReport(pb, who);
        } catch (e) {
          expect(e).toBeInstanceOf(HostReportError);
          expect((e as Error).message).toMatch(/^host report: (name|id|namespace|pod|entities\[\d+\]|more than|names app|the port)/);
          return;
        }
        expect(r.name).toMatch(/:\d+$/);
        const port = Number(r.name.slice(r.name.lastIndexOf(':') + 1));
        expect(port >= 1 && port <= 65535).toBe(true);
        expect([...r.entities].sort()).toEqual(r.entities);
        expect(new Set(r.entities).size).toBe(r.entities.length);
        for (const s of [r.name, r.id, r.namespace, r.pod, ...r.entities]) {
          expect(s.length).toBeLessThanOrEqual(256);
          expect(s).not.toMatch(/[\u0000-\u001f\u007f|]/);
        }
        if (who) expect({ id: r.id, namespace: r.namespace }).toEqual({ id: who.appId, namespace: who.namespace });
        else expect(r.id).not.toBe('');
      }),
      { numRuns: 500 },
    );
  });

  it('with a client certificate: a report of another app is refused, an empty one takes the certificate\'s', () => {
    const who = { trustDomain: 'td', namespace: 'prod', appId: 'cart' };
    expect(hostReport({ name: '10.0.0.1:50002', entities: ['b', 'a', 'a'] }, who)).toEqual({ name: '10.0.0.1:50002', id: 'cart', namespace: 'prod', pod: '', entities: ['a', 'b'] });
    expect(() => hostReport({ name: '10.0.0.1:50002', id: 'billing' }, who)).toThrow(/names app "billing".*certificate is app "cart"/);
    expect(() => hostReport({ name: '10.0.0.1:50002', id: 'cart', namespace: 'dev' }, who)).toThrow(HostReportError);
  });
});
