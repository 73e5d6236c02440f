/**
 * What a host may say about itself: checked before it reaches the table, so a bad report ends
 * that host's stream with INVALID_ARGUMENT naming the field, and never reaches other hosts.
 */
import type { WorkloadId } from '../../../shared/spiffe.ts';
import type { HostReport } from '../table.ts';
import type { PbHost } from './proto.ts';

const MAX_TEXT = 256;
const MAX_ENTITIES = 1000;
// host:port, the host a name, IPv4 or [IPv6]
const ADDRESS = /^(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$/;
// no control characters or separators rt's keys use
const PLAIN = /^[^\u0000-\u001f\u007f|]+$/;

export class HostReportError extends Error {}

function text(field: string, v: string | undefined, required: boolean): string {
  const s = v ?? '';
  if (!s) {
    if (required) throw new HostReportError(`host report: ${field} is required`);
    return '';
  }
  if (s.length > MAX_TEXT) throw new HostReportError(`host report: ${field} is longer than ${MAX_TEXT} characters`);
  if (!PLAIN.test(s)) throw new HostReportError(`host report: ${field} "${s.slice(0, 64)}" has a control character or "|"`);
  return s;
}

/**
 * The report a Host message makes, or a HostReportError. With mutual TLS (`who`) the app id and
 * namespace are the certificate's: a report that names others is refused, one that names none
 * gets them.
 */
export function hostReport(pb: PbHost, who?: WorkloadId): HostReport {
  const name = text('name', pb.name, true);
  if (!ADDRESS.test(name)) throw new HostReportError(`host report: name "${name.slice(0, 64)}" is not host:port (the sidecar's internal invocation address)`);
  const port = Number(name.slice(name.lastIndexOf(':') + 1));
  if (port < 1 || port > 65535) throw new HostReportError(`host report: the port of name "${name}" is not from 1 to 65535`);
  let id = text('id', pb.id, !who);
  let namespace = text('namespace', pb.namespace, false);
  if (who) {
    if ((id && id !== who.appId) || (namespace && namespace !== who.namespace)) {
      throw new HostReportError(`host report: names app "${id}" in namespace "${namespace}", but the client certificate is app "${who.appId}" in namespace "${who.namespace}"`);
    }
    id = who.appId;
    namespace = who.namespace;
  }
  const list = pb.entities ?? [];
  if (list.length > MAX_ENTITIES) throw new HostReportError(`host report: more than ${MAX_ENTITIES} actor types`);
  const entities = [...new Set(list.map((e, i) => text(`entities[${i}]`, e, true)))].sort();
  return { name, id, namespace, pod: text('pod', pb.pod, false), entities };
}
