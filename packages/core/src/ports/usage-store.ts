/**
 * Usage counts per key and hour: how many requests each key made that were answered, and how many
 * were refused with 429. KeyUsage counts them in memory and adds them in batches, one statement per
 * flush; the usage routes read them back summed by hour or by UTC day.
 */
import type { UsageGranularity } from '../domain/usage.js';

/** One hour of one key's requests, as KeyUsage flushes it (counts to add to what is stored). */
export interface UsageCount {
  readonly keyId: string;
  /** The start of the hour (UTC, a whole hour). */
  readonly hourStart: Date;
  /** Requests answered (anything but a 429). */
  readonly requests: number;
  /** Requests refused with 429. */
  readonly rateLimited: number;
}


/** Hours starting in [since, until), summed per bucket of `granularity` (an hour, or a UTC day). */
export interface UsageRange {
  readonly since: Date;
  readonly until: Date;
  readonly granularity: UsageGranularity;
}

/** One bucket with traffic: its start (a whole hour, or midnight UTC) and its sums. */
export interface UsageBucket {
  readonly start: Date;
  readonly requests: number;
  readonly rateLimited: number;
}

export interface UsageStore {
  /**
   * Adds the counts to each (key, hour), creating the row when there is none. One statement for the
   * whole batch; counts of the same (key, hour) given twice are summed; unknown key ids are
   * ignored. Not idempotent: a batch given twice counts twice.
   */
  add(counts: readonly UsageCount[]): Promise<void>;
  /** The key's buckets with traffic in `range`, oldest first (empty for a key of another organisation). */
  forKey(organisationId: string, keyId: string, range: UsageRange): Promise<UsageBucket[]>;
  /** The organisation's buckets with traffic in `range`, summed over all its keys, oldest first. */
  forOrganisation(organisationId: string, range: UsageRange): Promise<UsageBucket[]>;
  /** Deletes every hour that started before `before`; answers how many rows. */
  purge(before: Date): Promise<number>;
}
