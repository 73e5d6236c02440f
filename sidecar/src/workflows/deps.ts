/**
 * What the parts of the engine share: the instance table (the only writer of state), the worker
 * streams, durable timers, the clock, and who this replica and app are.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../../shared/clock.ts';
import type { InstanceTable } from './instances.ts';
import type { Timers } from './timers.ts';
import type { Workers } from './workers.ts';
import type { WorkflowTracing } from '../tracing/workflows.ts';

export interface EngineDeps {
  readonly table: InstanceTable;
  readonly workers: Workers;
  readonly timers: Timers;
  readonly log: Logger;
  /** Event timestamps, leases, and the delays of retries and stalled runs. */
  readonly clock: Clock;
  /** This replica's id: it holds leases and owns activities and timers. */
  readonly me: string;
  /** Names this app in propagated history; an action addressed to another app is refused. */
  readonly appId: string;
  /** The engine's spans, while tracing is on (absent: off, one check). */
  readonly tracing?: WorkflowTracing;
}
