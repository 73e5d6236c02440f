/** State API: placeholder until the state building block lands (see issue 2). */
import type { SidecarContext } from '../context.ts';

export async function setup(_ctx: SidecarContext): Promise<void> {}
