/**
 * Dapr protocol: workflow versioning (the patches a run saw and the version that ran) and
 * history propagation (a workflow hands its history to an activity or a child workflow), as the
 * reference runtime (durabletask-go behind Dapr) does them.
 *
 * - Versioning: the worker answers a run with `OrchestratorResponse.version`; it is kept in that
 *   run's OrchestratorStarted event, so every replay shows the worker the patches and the version
 *   name again (the SDK's `isPatched` answers from them on replay).
 * - Propagation: an action with `historyPropagationScope` OWN_HISTORY gets one chunk, the
 *   workflow's own history up to and including the action's event; LINEAGE puts the chunks the
 *   workflow itself received before it. Activities get it in their ActivityRequest, children in
 *   every OrchestratorRequest (it is stored with the child's record). A continue-as-new of a
 *   workflow that received history hands the next execution the previous one's history with the
 *   scope it received, as the reference does.
 */
import { PropagationScope, taskHubService, type HistoryEvent, type OrchestrationVersion, type PropagatedHistory } from './proto.ts';

/**
 * The version to store from a worker's answer, or undefined when it names nothing. Patches are
 * kept once each, in order. A string with control characters is dropped: it is no name a
 * workflow author wrote, but a Microsoft-protocol `orchestrationTraceContext` (which has the
 * same field number) decoded as a version.
 */
export function versionOf(v: OrchestrationVersion | null | undefined): OrchestrationVersion | undefined {
  if (!v) return undefined;
  const patches = [...new Set((v.patches ?? []).filter(isName))];
  const name = typeof v.name === 'string' && isName(v.name) ? v.name : undefined;
  if (!patches.length && name === undefined) return undefined;
  return name === undefined ? { patches } : { patches, name };
}

/**
 * Why a worker's answer cannot be applied to this history, or undefined when it can: the patches
 * recorded in the history (each once, in the order first seen) must begin the patches the worker
 * answered with. Removing, renaming or reordering an `isPatched` check would otherwise change
 * what an instance already did. As the reference runtime, whose answer is then PATCH_MISMATCH.
 */
export function patchMismatch(history: readonly HistoryEvent[], answered: OrchestrationVersion | null | undefined): string | undefined {
  const seen = new Set<string>();
  for (const e of history) for (const p of e.orchestratorStarted?.version?.patches ?? []) seen.add(p);
  if (seen.size === 0) return undefined;
  const past = [...seen];
  const now = versionOf(answered)?.patches ?? [];
  if (now.length >= past.length && past.every((p, i) => now[i] === p)) return undefined;
  return `the worker's patches [${now.join(', ')}] do not begin with the patches in the history [${past.join(', ')}]`;
}

function isName(s: string): boolean {
  return s.length > 0 && !/[\u0000-\u001f\u007f]/.test(s);
}

/** The scope an action asks for: OWN_HISTORY, LINEAGE, or NONE for anything else. */
export function scopeOf(n: number | null | undefined): number {
  return n === PropagationScope.OWN_HISTORY || n === PropagationScope.LINEAGE ? n : PropagationScope.NONE;
}

export interface Propagation {
  scope: number;
  /** The workflow's own history, oldest first, up to the event that propagates. */
  own: readonly HistoryEvent[];
  /** What the workflow itself received (forwarded with LINEAGE). */
  received?: PropagatedHistory;
  appId: string;
  instanceId: string;
}

/** The PropagatedHistory for an activity or a child, or undefined for scope NONE. */
export function propagate(p: Propagation): PropagatedHistory | undefined {
  if (p.scope === PropagationScope.NONE) return undefined;
  const chunks = p.scope === PropagationScope.LINEAGE ? [...(p.received?.chunks ?? [])] : [];
  const own = p.own.filter((e) => !e.orchestratorCompleted);
  if (own.length) {
    chunks.push({
      rawEvents: own.map(rawEvent),
      appId: p.appId,
      instanceId: p.instanceId,
      workflowName: own.find((e) => e.executionStarted)?.executionStarted?.name ?? '',
    });
  }
  return { scope: p.scope, chunks };
}

/**
 * The history propagated by the event `eventId` (a TaskScheduled or SubOrchestrationInstanceCreated
 * with a scope) of an instance's history: the same chunk the run that created it produced, since
 * an execution's history only grows. Undefined when the event asked for none.
 */
export function propagateFrom(history: readonly HistoryEvent[], eventId: number, kind: 'taskScheduled' | 'subOrchestrationInstanceCreated', rest: Omit<Propagation, 'scope' | 'own'>): PropagatedHistory | undefined {
  const at = history.findIndex((e) => e.eventId === eventId && e[kind]);
  if (at < 0) return undefined;
  const scope = scopeOf(history[at][kind]?.historyPropagationScope);
  return propagate({ ...rest, scope, own: history.slice(0, at + 1) });
}

/** Encoded events, base64, by event object: a fan-out encodes the shared history once. */
const encoded = new WeakMap<HistoryEvent, string>();

/** One event as the bytes of a HistoryEvent message, base64 (how `bytes` fields go through JSON and fromObject). */
function rawEvent(e: HistoryEvent): string {
  let b64 = encoded.get(e);
  if (b64 === undefined) {
    // GetInstanceHistoryResponse is `repeated HistoryEvent events = 1`: one event framed as tag, length, message
    const framed = taskHubService().GetInstanceHistory.responseSerialize({ events: [e] });
    let i = 1;
    while (framed[i++]! & 0x80);
    b64 = framed.subarray(i).toString('base64');
    encoded.set(e, b64);
  }
  return b64;
}
