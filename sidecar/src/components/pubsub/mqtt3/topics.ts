/**
 * MQTT topic names and filters: which subscription a message's topic belongs to (`+` one level,
 * `#` the rest, `$share/<group>/` shared subscriptions matched by their filter), and the checks
 * that keep a malformed topic from reaching the broker (which would close the connection).
 */

const SHARED = /^\$share\/[^/#+]+\//;

/** The filter a subscription matches by: a shared subscription's without its `$share/<group>/`. */
export function matchingFilter(filter: string): string {
  return filter.replace(SHARED, '');
}

/** Whether `topic` (a name, no wildcards) matches `filter`, as MQTT 3.1.1 §4.7 says. */
export function topicMatches(filter: string, topic: string): boolean {
  const f = matchingFilter(filter).split('/');
  const t = topic.split('/');
  // wildcards at the first level never match the broker's own `$` topics
  if (topic.startsWith('$') && (f[0] === '+' || f[0] === '#')) return false;
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true; // `a/#` matches `a` too
    if (i >= t.length) return false;
    if (f[i] !== '+' && f[i] !== t[i]) return false;
  }
  return f.length === t.length;
}

/** Why `topic` cannot be published to (wildcards, NUL, empty, too long); undefined when it can. */
export function publishTopicProblem(topic: string): string | undefined {
  if (topic === '') return 'the topic is empty';
  if (/[+#]/.test(topic)) return `topic "${topic.slice(0, 80)}" has a wildcard (+ or #): MQTT takes those in subscriptions only`;
  if (topic.includes('\0')) return 'the topic has a NUL character';
  if (Buffer.byteLength(topic) > 65_535) return 'the topic is longer than 65,535 bytes';
  return undefined;
}

/** Why `filter` cannot be subscribed to; undefined when it can. */
export function filterProblem(filter: string): string | undefined {
  if (filter === '') return 'the topic is empty';
  if (filter.includes('\0')) return 'the topic has a NUL character';
  const levels = matchingFilter(filter).split('/');
  for (let i = 0; i < levels.length; i++) {
    const l = levels[i];
    if (l.includes('#') && (l !== '#' || i !== levels.length - 1)) return `topic filter "${filter.slice(0, 80)}": # stands alone as the last level (a/#)`;
    if (l.includes('+') && l !== '+') return `topic filter "${filter.slice(0, 80)}": + stands alone as a level (a/+/c)`;
  }
  return undefined;
}
