/**
 * Instance id rules. Ids chosen by a caller of the HTTP start endpoint: letters, digits, `_`
 * and `-`, at most 64 characters (ARCHITECTURE). Other calls also accept what the engine and
 * the SDKs generate themselves: sub-orchestration ids are `<parent>:<hex task id>`.
 */
import { WorkflowError } from './errors.ts';

const START_ID = /^[A-Za-z0-9_-]{1,64}$/;
const ANY_ID = /^[A-Za-z0-9_\-:.]{1,256}$/;

/** Throws WorkflowError INVALID when `id` cannot be an instance id. */
export function checkInstanceId(id: string, use: 'start' | 'grpc' | 'lookup'): void {
  // the reference runtime's own code for a long id, which client code checks
  const max = use === 'start' ? 64 : 256;
  if (id.length > max) throw new WorkflowError('INVALID', `instance id "${preview(id)}" is too long: ${id.length} characters, at most ${max}`, 'ERR_INSTANCE_ID_TOO_LONG');
  if (use === 'start') {
    if (!START_ID.test(id)) throw new WorkflowError('INVALID', `instance id "${preview(id)}" is invalid: use 1 to 64 letters, digits, "_" or "-"`);
    return;
  }
  if (!ANY_ID.test(id)) throw new WorkflowError('INVALID', `instance id "${preview(id)}" is invalid: use 1 to 256 letters, digits, "_", "-", ":" or "."`);
}

function preview(s: string): string {
  return s.length > 70 ? `${s.slice(0, 70)}…` : s;
}
