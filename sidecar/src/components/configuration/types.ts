/**
 * What a configuration store offers the configuration building block (configuration/service.ts).
 * The block owns subscription ids and delivery; a store only reads items and watches changes.
 */
import type { Component } from '../types.ts';

/** One configuration item as the reference's API shows it. */
export interface ConfigurationItem {
  value: string;
  version: string;
  metadata: Record<string, string>;
}

/** key → item. A changed key whose item is gone (deleted, expired) maps to an empty item. */
export type ConfigurationItems = Record<string, ConfigurationItem>;

export interface ConfigurationWatchRequest {
  /** Empty: every key of the store. */
  keys: string[];
  metadata: Record<string, string>;
}

/**
 * Called with the items of one change. A store calls it for one key at a time in the order of
 * that key's changes, and waits for it to settle before the key's next call (order per key).
 */
export type ConfigurationChangeHandler = (items: ConfigurationItems) => Promise<void>;

export interface ConfigurationWatch {
  /** Stops the watch; no call of its handler starts afterwards. */
  stop(): Promise<void>;
}

export interface ConfigurationStore extends Component {
  /** The items of `keys` that exist (every item when `keys` is empty). */
  get(keys: string[], metadata: Record<string, string>): Promise<ConfigurationItems>;
  /** Resolves once the store listens: every change made after that reaches `onChange`. */
  subscribe(req: ConfigurationWatchRequest, onChange: ConfigurationChangeHandler): Promise<ConfigurationWatch>;
}

/** A fresh empty item (a deleted key's notification). */
export function emptyItem(): ConfigurationItem {
  return { value: '', version: '', metadata: {} };
}

/** A subscription the store refuses for what the request says (no notify channel, …): the caller's to fix. */
export class ConfigurationRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigurationRequestError';
  }
}
