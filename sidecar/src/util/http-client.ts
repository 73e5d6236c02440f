/**
 * undici's HTTP client (Pool, Agent and their request API) without the rest of the package.
 * `import 'undici'` runs its whole index: fetch, WebSocket, EventSource, the cache, the mock
 * agents and more, none of which rt uses — twice the start-up time and ~12 MB more RSS than
 * these three modules (bench/startup.bench.ts, bench/README.md `### startup`). The request API
 * (`request`, `stream`, …) is what undici's index installs on Dispatcher.prototype; it is
 * installed here the same way, so a process that also loads the full package gets the same
 * classes with the same methods.
 */
import type * as Undici from 'undici';
import DispatcherClass from 'undici/lib/dispatcher/dispatcher.js';
import PoolClass from 'undici/lib/dispatcher/pool.js';
import AgentClass from 'undici/lib/dispatcher/agent.js';
import api from 'undici/lib/api/index.js';

Object.assign((DispatcherClass as { prototype: object }).prototype, api);

export const Pool = PoolClass as typeof Undici.Pool;
export const Agent = AgentClass as typeof Undici.Agent;
export type Pool = Undici.Pool;
export type Agent = Undici.Agent;
export type { Dispatcher } from 'undici';
