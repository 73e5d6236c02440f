/**
 * The job data mapping (sidecar/src/grpc/runtime/any.ts) through real protobuf encoding: the Any
 * a GetJobAlpha1 answer carries, decoded as a ScheduleJobAlpha1 request would be, maps back to
 * the same stored JSON — for any JSON value, and for a caller's own message type.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyToJson, jsonToAny, type AnyMsg } from '../../sidecar/src/grpc/runtime/any.ts';
import { runtimeService } from '../../sidecar/src/grpc/runtime/proto.ts';

const service = runtimeService();

/** stored JSON → Any in a GetJob answer → bytes → Any as a ScheduleJob request decodes it. */
function overTheWire(json: string): AnyMsg | null {
  const bytes = service.GetJobAlpha1.responseSerialize({ job: { name: 'j', data: jsonToAny(json) } });
  const answer = service.GetJobAlpha1.responseDeserialize(bytes) as { job: { data: AnyMsg | null } };
  const again = service.ScheduleJobAlpha1.requestSerialize({ job: { name: 'j', data: answer.job.data } });
  return (service.ScheduleJobAlpha1.requestDeserialize(again) as { job: { data: AnyMsg | null } }).job.data;
}

describe('job data Any ↔ JSON', () => {
  it('any JSON value survives the round trip through protobuf', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), (text) => {
        const stored = JSON.stringify(JSON.parse(text));
        // -0 has no JSON spelling of its own: it is stored as 0 either way
        expect(anyToJson(overTheWire(stored))).toBe(JSON.stringify(JSON.parse(stored)));
      }),
      { numRuns: 300 },
    );
  });

  it("a caller's own message type round-trips as bytes; look-alike JSON stays a Value", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.stringMatching(/^[a-z]{1,8}\.[A-Z][a-z]{0,8}$/), (bytes, type) => {
        const stored = anyToJson({ type_url: `type.googleapis.com/${type}`, value: Buffer.from(bytes) });
        const back = overTheWire(stored as string);
        expect(back?.type_url).toBe(`type.googleapis.com/${type}`);
        expect(Buffer.from(back?.value as Uint8Array)).toEqual(Buffer.from(bytes));
      }),
      { numRuns: 200 },
    );
    expect(jsonToAny(JSON.stringify({ '@type': 'x/y', value: 'not base64!' }))?.['@type']).toBe('type.googleapis.com/google.protobuf.Value');
    expect(jsonToAny(JSON.stringify({ '@type': 'no-slash', value: 'AA==' }))?.['@type']).toBe('type.googleapis.com/google.protobuf.Value');
  });
});

describe('job data Any ↔ JSON, keys that are special in JavaScript', () => {
  it('keeps "__proto__", "constructor" and "toString" keys as data', () => {
    for (const stored of ['[{"__proto__":{}}]', '{"__proto__":{"a":1},"constructor":2,"toString":"x"}']) {
      expect(anyToJson(overTheWire(stored))).toBe(stored);
    }
  });
});
