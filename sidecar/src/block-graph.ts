/**
 * What a building block is: one entry (`<block>/block.ts`) naming the services it needs, uses and
 * provides. The start order comes from those declarations, not from where a block sits in
 * blocks.ts: a block starts after the providers of what it needs or uses. A need no block
 * provides, two providers of one service, or blocks that need each other in a cycle stop the
 * sidecar at start with a message naming the blocks.
 *
 * A block's setup returns the services it provides; they go to `ctx.services` (for the API
 * surfaces that look them up per call) and to the setup of each block that needs them.
 */
import type { BlockServices, SidecarContext } from './context.ts';

/** A service a building block may provide (the sidecar itself provides `shutdown`). */
export type ServiceName = Exclude<keyof BlockServices, 'shutdown'>;

/**
 * `catalog` blocks start before components are created (they may add component types, as the
 * pluggable block does); `blocks` (the default) once components are loaded.
 */
export type BlockPhase = 'catalog' | 'blocks';

export interface Block<N extends ServiceName = ServiceName, P extends ServiceName = ServiceName> {
  name: string;
  phase?: BlockPhase;
  /** Services it cannot start without: a block in the list must provide each, and must have provided it. */
  needs?: readonly N[];
  /** Services it uses when they are there (looked up in ctx.services): it starts after their providers, if any runs. */
  uses?: readonly ServiceName[];
  /** Services it may provide (a block may leave one out, e.g. jobs without a scheduler). */
  provides?: readonly P[];
  setup(ctx: SidecarContext, needs: Pick<Required<BlockServices>, N>): Promise<Partial<Pick<BlockServices, P>> | void>;
}

/** Any block, whatever it needs and provides (the list's element type). */
export type AnyBlock = Block<ServiceName, ServiceName>;

/** Declares a block, typing its setup's `needs` argument and return from `needs` and `provides`. */
export function defineBlock<N extends ServiceName = never, P extends ServiceName = never>(block: Block<N, P>): Block<N, P> {
  return block;
}

const PHASES: readonly BlockPhase[] = ['catalog', 'blocks'];
const phaseOf = (b: AnyBlock): BlockPhase => b.phase ?? 'blocks';

interface Edge {
  to: AnyBlock;
  service: ServiceName;
}

/**
 * The start order: catalog blocks first, then the rest, each after the providers of what it
 * needs or uses; blocks with no order between them keep the list's order. Throws, naming the
 * blocks, when the declarations cannot hold.
 */
export function orderBlocks(blocks: readonly AnyBlock[]): AnyBlock[] {
  const problems: string[] = [];
  const names = new Set<string>();
  const providers = new Map<ServiceName, AnyBlock>();
  for (const b of blocks) {
    if (names.has(b.name)) problems.push(`two blocks are named "${b.name}"`);
    names.add(b.name);
    for (const s of b.provides ?? []) {
      const other = providers.get(s);
      if (other) problems.push(`"${s}" is provided by both "${other.name}" and "${b.name}"`);
      else providers.set(s, b);
    }
  }
  const edges = new Map<AnyBlock, Edge[]>();
  for (const b of blocks) {
    const out: Edge[] = [];
    const wanted = [...(b.needs ?? []).map((s) => ({ s, hard: true })), ...(b.uses ?? []).map((s) => ({ s, hard: false }))];
    for (const { s, hard } of wanted) {
      const p = providers.get(s);
      if (!p) {
        if (hard) problems.push(`"${b.name}" needs "${s}", which no block provides`);
        continue;
      }
      if (p === b) {
        if (hard) problems.push(`"${b.name}" needs "${s}", which it provides itself`);
        continue;
      }
      if (PHASES.indexOf(phaseOf(p)) > PHASES.indexOf(phaseOf(b))) problems.push(`"${b.name}" (${phaseOf(b)}) needs "${s}" from "${p.name}", which starts later (${phaseOf(p)})`);
      out.push({ to: p, service: s });
    }
    edges.set(b, out);
  }
  if (problems.length > 0) throw new Error(`building blocks: ${problems.join('; ')}`);

  // depth-first, in list order: a block is placed once everything it waits for is
  const order: AnyBlock[] = [];
  const done = new Set<AnyBlock>();
  const path: { block: AnyBlock; via?: ServiceName }[] = [];
  const visit = (b: AnyBlock, via?: ServiceName): void => {
    if (done.has(b)) return;
    const at = path.findIndex((p) => p.block === b);
    if (at >= 0) {
      const loop = [...path.slice(at), { block: b, via }];
      const steps = loop.slice(1).map((step, i) => `"${loop[i].block.name}" needs "${step.via}" from "${step.block.name}"`);
      throw new Error(`building blocks: a cycle: ${steps.join(', ')}`);
    }
    path.push({ block: b, via });
    for (const e of edges.get(b)!) visit(e.to, e.service);
    path.pop();
    done.add(b);
    order.push(b);
  };
  for (const b of blocks) visit(b);
  // a stable split by phase keeps the order valid: no block waits for one of a later phase (checked above)
  return PHASES.flatMap((phase) => order.filter((b) => phaseOf(b) === phase));
}

/** Starts the blocks of one phase, in the given order (from orderBlocks), filling ctx.services. */
export async function startBlocks(ctx: SidecarContext, ordered: readonly AnyBlock[], phase: BlockPhase): Promise<void> {
  for (const b of ordered) {
    if (phaseOf(b) !== phase) continue;
    const needs: Partial<BlockServices> = {};
    for (const s of b.needs ?? []) {
      const service = ctx.services[s];
      if (service === undefined) {
        const from = ordered.find((p) => p.provides?.includes(s));
        throw new Error(`building block "${b.name}" needs "${s}", which "${from?.name ?? '?'}" did not provide at start`);
      }
      (needs as Record<string, unknown>)[s] = service;
    }
    const provided = (await b.setup(ctx, needs as Required<BlockServices>)) ?? {};
    for (const [s, service] of Object.entries(provided)) {
      if (!b.provides?.includes(s as ServiceName)) throw new Error(`building block "${b.name}" provided "${s}", which it does not declare`);
      if (service !== undefined) (ctx.services as Record<string, unknown>)[s] = service;
    }
  }
}
