/** The batcher that coalesces concurrent single-key calls to a component into bulk calls. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Batcher } from '../../sidecar/src/pluggable/batcher.ts';

function recorder(opts: { failMany?: boolean; failOn?: number } = {}) {
  const calls: { kind: 'single' | 'many'; inputs: number[] }[] = [];
  const single = async (n: number) => {
    calls.push({ kind: 'single', inputs: [n] });
    await new Promise((r) => setTimeout(r, 1));
    if (n === opts.failOn) throw new Error(`bad ${n}`);
    return n * 10;
  };
  const many = async (ns: number[]) => {
    calls.push({ kind: 'many', inputs: ns });
    await new Promise((r) => setTimeout(r, 1));
    if (opts.failMany || ns.includes(opts.failOn ?? NaN)) throw new Error('bulk failed');
    return ns.map((n) => n * 10);
  };
  return { calls, single, many };
}

describe('Batcher', () => {
  it('a lone call goes out at once as a single call', async () => {
    const r = recorder();
    const b = new Batcher(r.single, r.many);
    expect(await b.run(3)).toBe(30);
    expect(r.calls).toEqual([{ kind: 'single', inputs: [3] }]);
  });

  it('calls made while the slots are busy go out together, each caller getting its own answer', async () => {
    const r = recorder();
    const b = new Batcher(r.single, r.many, { maxInFlight: 1 });
    const out = await Promise.all(Array.from({ length: 20 }, (_, i) => b.run(i)));
    expect(out).toEqual(Array.from({ length: 20 }, (_, i) => i * 10));
    expect(r.calls.length).toBeLessThan(20);
    expect(r.calls.some((c) => c.kind === 'many')).toBe(true);
  });

  it('when the bulk call fails, every input is retried alone: only the bad one fails', async () => {
    const r = recorder({ failOn: 5 });
    const b = new Batcher(r.single, r.many, { maxInFlight: 1 });
    const out = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => b.run(i)));
    out.forEach((o, i) => {
      if (i === 5) expect(o).toMatchObject({ status: 'rejected', reason: new Error('bad 5') });
      else expect(o).toEqual({ status: 'fulfilled', value: i * 10 });
    });
  });

  it('property: any mix of concurrency, batch size and failures answers every caller exactly as a single call would', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 60 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 8 }),
        fc.option(fc.integer({ min: 0, max: 20 })),
        async (inputs, maxInFlight, maxBatch, failOn) => {
          const r = recorder({ failOn: failOn ?? undefined });
          const b = new Batcher(r.single, r.many, { maxInFlight, maxBatch });
          const out = await Promise.allSettled(inputs.map((n) => b.run(n)));
          out.forEach((o, i) => {
            if (inputs[i] === failOn) expect(o.status).toBe('rejected');
            else expect(o).toEqual({ status: 'fulfilled', value: inputs[i] * 10 });
          });
          for (const c of r.calls) if (c.kind === 'many') expect(c.inputs.length).toBeLessThanOrEqual(maxBatch);
        },
      ),
      { numRuns: 60 },
    );
  });
});
