/**
 * The building blocks' start order comes from what each declares it needs, uses and provides
 * (sidecar/src/block-graph.ts), not from the order of sidecar/src/blocks.ts.
 */
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { orderBlocks, startBlocks, type AnyBlock } from '../../sidecar/src/block-graph.ts';
import * as listed from '../../sidecar/src/blocks.ts';
import type { SidecarContext } from '../../sidecar/src/context.ts';

const SRC = join(import.meta.dirname, '..', '..', 'sidecar', 'src');

function block(name: string, decl: Partial<Pick<AnyBlock, 'needs' | 'uses' | 'provides' | 'phase'>> = {}, provided: Record<string, unknown> = {}): AnyBlock {
  return { name, ...decl, setup: async () => provided as never };
}

const names = (blocks: AnyBlock[]) => blocks.map((b) => b.name);

/** Every block starts after the providers of what it needs or uses, and catalog blocks first. */
function assertValid(order: AnyBlock[]): void {
  for (const [i, b] of order.entries()) {
    for (const s of [...(b.needs ?? []), ...(b.uses ?? [])]) {
      const p = order.findIndex((o) => o !== b && o.provides?.includes(s));
      if (p >= 0) expect(p, `${b.name} after the provider of ${s}`).toBeLessThan(i);
    }
    if (b.phase === 'catalog') expect(order.slice(0, i).every((o) => o.phase === 'catalog')).toBe(true);
  }
}

describe('block start order', () => {
  it('starts a block after the providers of what it needs and uses, whatever the list order', () => {
    const api = block('api', { needs: ['state'], uses: ['workflows', 'pubsub'] });
    const wf = block('workflows', { uses: ['internalJobs'], provides: ['workflows'] });
    const jobs = block('jobs', { provides: ['jobs', 'internalJobs'] });
    const state = block('state', { provides: ['state'] });
    const plug = block('pluggable', { phase: 'catalog' });
    expect(names(orderBlocks([api, wf, jobs, state, plug]))).toEqual(['pluggable', 'state', 'jobs', 'workflows', 'api']);
    fc.assert(
      fc.property(fc.shuffledSubarray([api, wf, jobs, state, plug], { minLength: 5 }), (list) => {
        const order = orderBlocks(list);
        expect(order).toHaveLength(5);
        assertValid(order);
      }),
    );
  });

  it('keeps the list order between blocks with no order between them', () => {
    expect(names(orderBlocks([block('b'), block('a'), block('c')]))).toEqual(['b', 'a', 'c']);
  });

  it('a used service nobody provides is fine; a needed one stops the start, naming both', () => {
    expect(names(orderBlocks([block('wf', { uses: ['internalJobs'] })]))).toEqual(['wf']);
    expect(() => orderBlocks([block('api', { needs: ['state'] }), block('jobs', { provides: ['jobs'] })])).toThrow('building blocks: "api" needs "state", which no block provides');
  });

  it('refuses a cycle, naming the blocks and services around it', () => {
    const a = block('a', { needs: ['state'], provides: ['jobs'] });
    const b = block('b', { uses: ['jobs'], provides: ['state'] });
    expect(() => orderBlocks([a, b])).toThrow('building blocks: a cycle: "a" needs "state" from "b", "b" needs "jobs" from "a"');
    const c = block('c', { needs: ['secrets'], provides: ['state'] });
    const d = block('d', { needs: ['state'], provides: ['bindings'] });
    const e = block('e', { needs: ['bindings'], provides: ['secrets'] });
    expect(() => orderBlocks([block('x'), c, d, e])).toThrow('a cycle: "c" needs "secrets" from "e", "e" needs "bindings" from "d", "d" needs "state" from "c"');
  });

  it('refuses two providers of one service, two blocks of one name, and a need of its own', () => {
    expect(() => orderBlocks([block('a', { provides: ['state'] }), block('b', { provides: ['state'] })])).toThrow('"state" is provided by both "a" and "b"');
    expect(() => orderBlocks([block('a'), block('a')])).toThrow('two blocks are named "a"');
    expect(() => orderBlocks([block('a', { needs: ['state'], provides: ['state'] })])).toThrow('"a" needs "state", which it provides itself');
  });

  it('refuses a catalog block that needs a service of a later phase', () => {
    expect(() => orderBlocks([block('plug', { phase: 'catalog', needs: ['state'] }), block('state', { provides: ['state'] })])).toThrow(
      '"plug" (catalog) needs "state" from "state", which starts later (blocks)',
    );
  });
});

describe('starting blocks', () => {
  const ctx = () => ({ services: {} }) as unknown as SidecarContext;

  it('hands a block the services it needs and fills ctx.services with what blocks return', async () => {
    const seen: unknown[] = [];
    const state = { kind: 'state' };
    const consumer: AnyBlock = { name: 'api', needs: ['state'], setup: async (_c, needs) => void seen.push(needs.state) };
    const c = ctx();
    await startBlocks(c, orderBlocks([consumer, block('state', { provides: ['state'] }, { state })]), 'blocks');
    expect(seen).toEqual([state]);
    expect(c.services.state).toBe(state);
  });

  it('runs only the blocks of the phase asked for', async () => {
    const ran: string[] = [];
    const mk = (name: string, phase?: 'catalog'): AnyBlock => ({ name, phase, setup: async () => void ran.push(name) });
    const order = orderBlocks([mk('a'), mk('p', 'catalog')]);
    await startBlocks(ctx(), order, 'catalog');
    expect(ran).toEqual(['p']);
  });

  it('stops when a provider did not provide what another block needs, naming both', async () => {
    const order = orderBlocks([block('api', { needs: ['internalJobs'] }), block('jobs', { provides: ['jobs', 'internalJobs'] }, { jobs: {} })]);
    await expect(startBlocks(ctx(), order, 'blocks')).rejects.toThrow('building block "api" needs "internalJobs", which "jobs" did not provide at start');
  });

  it('refuses a service a block provides without declaring it', async () => {
    await expect(startBlocks(ctx(), [block('sneaky', {}, { state: {} })], 'blocks')).rejects.toThrow('building block "sneaky" provided "state", which it does not declare');
  });
});

describe("the sidecar's blocks (sidecar/src/blocks.ts)", () => {
  const blocks = Object.values(listed) as AnyBlock[];

  it('resolve, each after what it needs and uses', () => {
    const order = orderBlocks(blocks);
    assertValid(order);
    // the catalog blocks first: pluggable (component types) and tracing (its hooks before any route)
    expect(names(order).slice(0, 2).sort()).toEqual(['pluggable', 'tracing']);
    // the runtime API needs the services it serves over gRPC
    expect(names(order).indexOf('runtime-api')).toBeGreaterThan(names(order).indexOf('state'));
    expect(names(order).indexOf('workflows')).toBeGreaterThan(names(order).indexOf('jobs'));
  });

  it('every folder with a block.ts is listed, and each listed block has one', () => {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (!e.isDirectory()) continue;
        const sub = join(dir, e.name);
        if (existsSync(join(sub, 'block.ts'))) found.push(sub.slice(SRC.length + 1));
        walk(sub);
      }
    };
    walk(SRC);
    expect(found.length).toBe(blocks.length);
  });
});
