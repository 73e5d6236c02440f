/**
 * One actor's turns (sidecar/src/actors/turns.ts) with the turn wait: a call that waits past it is
 * refused and leaves the queue (it never gets the turn later), the calls behind it keep their
 * order, and a call of the chain holding the turn is not made to wait at all.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Turns, TurnTimeoutError } from '../../sidecar/src/actors/turns.ts';

const OFF = { enabled: false, maxStackDepth: 32 };
const ON = { enabled: true, maxStackDepth: 32 };

describe('actor turns with a wait bound', () => {
  it('refuses a call that waited too long, and gives the turn to the next one, never to it', async () => {
    const t = new Turns();
    const first = t.enter(undefined, OFF, 50) as () => void;
    const late = t.enter(undefined, OFF, 20);
    const next = t.enter(undefined, OFF, 5000);
    await expect(late).rejects.toBeInstanceOf(TurnTimeoutError);
    first();
    const release = await next;
    expect(t.busy).toBe(true);
    release();
    expect(t.busy).toBe(false);
  });

  it('lets the chain holding the turn in at once, whatever the bound', () => {
    const t = new Turns();
    const outer = t.enter('chain', ON, 1);
    const inner = t.enter('chain', ON, 1);
    expect(typeof outer).toBe('function');
    expect(typeof inner).toBe('function');
    (inner as () => void)();
    (outer as () => void)();
    expect(t.busy).toBe(false);
  });

  it('property: whichever waiting calls give up, the others get the turn one at a time in arrival order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), async (givesUp) => {
        const t = new Turns();
        const holder = t.enter(undefined, OFF) as () => void;
        const order: number[] = [];
        const waits = givesUp.map((g, i) =>
          Promise.resolve(t.enter(undefined, OFF, g ? 1 : 10_000)).then(
            (release) => {
              order.push(i);
              release();
            },
            (e: unknown) => expect(e).toBeInstanceOf(TurnTimeoutError),
          ),
        );
        // every call that gives up has given up before the holder lets go
        await new Promise((r) => setTimeout(r, 5));
        holder();
        await Promise.all(waits);
        expect(order).toEqual(givesUp.flatMap((g, i) => (g ? [] : [i])));
        expect(t.busy).toBe(false);
      }),
      { numRuns: 40 },
    );
  });
});
