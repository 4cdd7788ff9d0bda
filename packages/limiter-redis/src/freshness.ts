/**
 * Credential freshness (the CredentialFreshness port) on Redis, under the key names the core gives
 * (counter-keys.ts), behind the prefix. Per organisation, next to its counters (same hash tag):
 * `<prefix>:{org:<id>}:cc:token` (the current token, random, never reused) and
 * `<prefix>:{org:<id>}:cc:changes` (a sorted set of changes in progress, scored by their expiry on
 * Redis's clock). Per hash slot of the organisation's tag: `<prefix>:{<slot tag>}:cc:alive` and
 * `<prefix>:{<slot tag>}:cc:unsettled` (scripts.ts says what they mean).
 */
import { randomBytes } from 'node:crypto';
import type { CredentialFreshness, FreshnessCheck, FreshnessKeys, FreshnessReply } from '@cos/core';
import { DEFAULT_MAX_REPLICAS_WAITED, type RedisCounterSettings } from './config.js';
import type { Connection } from './connection.js';
import { RedisCounterError, errorMessage } from './errors.js';
import type { RedisLink } from './redis-link.js';
import { MODE, NOT_COUNTED } from './scripts.js';

export class RedisFreshness implements CredentialFreshness {
  readonly #link: RedisLink;
  readonly #timeoutMs: number;
  readonly #changeBoundMs: number;
  readonly #minReplicasAcked: number | undefined;
  readonly #replicaAckTimeoutMs: number;
  /** Tokens are `<this process's random nonce>.<sequence>`: never reused, by any process. */
  readonly #tokenNonce = randomBytes(12).toString('base64url');
  #tokenSeq = 0;

  constructor(link: RedisLink, settings: RedisCounterSettings) {
    this.#link = link;
    this.#timeoutMs = settings.timeoutMs;
    this.#changeBoundMs = settings.changeBoundMs;
    this.#minReplicasAcked = settings.minReplicasAcked;
    this.#replicaAckTimeoutMs = settings.replicaAckTimeoutMs;
  }

  /**
   * One round trip (CredentialFreshness.check): the organisation's token and whether it is
   * settled, and its counter counted as asked. Not bounded here (the core races it against
   * REDIS_TIMEOUT_MS); a call that reaches Redis after that deadline counts nothing and rejects.
   */
  check(request: FreshnessCheck): Promise<FreshnessReply> {
    const ready = this.#link.readyError();
    if (ready !== null) return Promise.reject(ready);
    const deadlineMs = Date.now() + this.#link.clockOffsetMs + this.#timeoutMs;
    const names = request.keys;
    const keys = [this.#link.keyFor(request.counterKey), this.#link.keyFor(names.token), this.#link.keyFor(names.changes), this.#link.keyFor(names.alive), this.#link.keyFor(names.unsettled)];
    const args = [
      String(Math.max(1, Math.ceil(request.ttlMs))),
      String(deadlineMs),
      request.tag ?? '',
      MODE[request.count],
      this.#newToken(),
      String(this.#changeBoundMs),
    ];
    const hits = request.hits;
    const guards = request.keyCounters;
    const guarded = guards !== undefined && guards.length > 0;
    if (guarded || (hits !== undefined && hits !== 1)) args.push(String(Math.max(1, Math.floor(hits ?? 1))));
    if (guarded) {
      for (const guard of guards) {
        keys.push(this.#link.keyFor(guard.counterKey));
        args.push(String(guard.hits), String(guard.limit));
      }
    }
    return (guarded ? this.#link.client.guardedFreshness(keys, args) : this.#link.client.freshness(keys, args)).then(
      (reply) => {
        if (typeof reply === 'number' || !Array.isArray(reply)) {
          throw new RedisCounterError('expired', `redis credential freshness: the call reached ${this.#link.target} after its deadline; not counted`);
        }
        const [count, token, settled, fresh] = reply;
        const counted = count === NOT_COUNTED ? null : Number(count);
        if (!guarded || counted === null) return { count: counted, token: String(token), settled: Number(settled) === 1, fresh: Number(fresh) === 1 };
        const keyCounts: number[] = [];
        for (let i = 4; i < reply.length; i++) keyCounts.push(Number(reply[i]));
        return { count: counted, token: String(token), settled: Number(settled) === 1, fresh: Number(fresh) === 1, keyCounts };
      },
      (err: unknown) => {
        throw err instanceof RedisCounterError ? err : new RedisCounterError('command-failed', `redis credential freshness: ${errorMessage(err)}`, { cause: err });
      },
    );
  }

  /** Registers a change of the organisation in progress (a marker for changeBoundMs) and replaces its token. */
  async beginChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    await this.#change('beginChange', keys, changeId);
  }

  /** Replaces the organisation's token again and removes the change's marker. */
  async endChange(keys: FreshnessKeys, changeId: string): Promise<void> {
    await this.#change('endChange', keys, changeId);
  }

  async #change(script: 'beginChange' | 'endChange', names: FreshnessKeys, changeId: string): Promise<void> {
    const ready = this.#link.readyError() ?? (this.#link.changes.isReady ? null : this.#link.notConnected());
    if (ready !== null) throw ready;
    const [token, changes, alive, unsettled] = [this.#link.keyFor(names.token), this.#link.keyFor(names.changes), this.#link.keyFor(names.alive), this.#link.keyFor(names.unsettled)];
    const connection = this.#link.changes;
    let wanted: number;
    try {
      // KEYS[3] is unused (the same layout as CHECK_SCRIPT's keys, so ALIVE_CHECK reads KEYS[4], KEYS[5], ARGV[6]).
      const written = connection[script]([token, changes, token, alive, unsettled], [changeId, this.#newToken(), '', '', '', String(this.#changeBoundMs)]);
      // Only the begin waits: it is what keeps every cache off the organisation's entries (a new token
      // and the marker). An end lost in a failover leaves the begin's token and marker on the promoted
      // replica: entries filled under the end's token are never fresh there, and none fills until the
      // marker expired, after the commit.
      const replicas = script === 'beginChange' && this.#minReplicasAcked === undefined ? replicaCount(connection, token) : null;
      const [reported] = await Promise.all([replicas, written]);
      if (script === 'endChange') return;
      wanted = this.#minReplicasAcked ?? Math.min(DEFAULT_MAX_REPLICAS_WAITED, reported ?? 0);
      if (wanted === 0) return;
      // WAIT on the connection that wrote: it answers how many replicas acknowledged every write it sent.
      const acked = Number(await connection.command(token, ['WAIT', String(wanted), String(this.#replicaAckTimeoutMs)]));
      if (acked >= wanted) return;
      throw new RedisCounterError(
        'not-replicated',
        `redis credential freshness: ${acked} of ${wanted} replica(s) of ${this.#link.target} acknowledged the change within ${this.#replicaAckTimeoutMs} ms (a failover could lose it)`,
      );
    } catch (err) {
      throw err instanceof RedisCounterError ? err : new RedisCounterError('command-failed', `redis credential freshness: ${errorMessage(err)}`, { cause: err });
    }
  }

  #newToken(): string {
    return `${this.#tokenNonce}.${++this.#tokenSeq}`;
  }
}

/** The replicas a primary's ROLE reply lists (0 for anything else). */
function replicasOf(role: unknown): number {
  return Array.isArray(role) && role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
}

/**
 * The replicas of the primary of `key`. In a cluster: every one the cluster lists for it (CLUSTER
 * NODES on the primary), its replication link up or not, failed or not. A replica whose link is cut
 * is still promoted when the primary fails, with the data it had, and one marked failed can rejoin
 * and be promoted the same way: a change none of them acknowledged could be lost. Elsewhere (or
 * where CLUSTER NODES is refused): the replicas the primary reports, ROLE, or where a provider
 * renamed or disabled it,
 * `connected_slaves` of INFO replication. Neither answering rejects (the change is refused): set
 * REDIS_MIN_REPLICAS_ACKED then.
 */
async function replicaCount(connection: Connection, key: string): Promise<number> {
  if (connection.isCluster) {
    const nodes = await connection.command(key, ['CLUSTER', 'NODES']).catch(() => undefined);
    if (nodes !== undefined) return clusterReplicasOf(String(nodes));
  }
  try {
    return replicasOf(await connection.command(key, ['ROLE']));
  } catch (roleError) {
    let info: unknown;
    try {
      info = await connection.command(key, ['INFO', 'replication']);
    } catch {
      throw new RedisCounterError(
        'command-failed',
        `redis credential freshness: neither ROLE nor INFO replication answered (${errorMessage(roleError)}): set REDIS_MIN_REPLICAS_ACKED to the replicas to wait for`,
        { cause: roleError },
      );
    }
    const match = /^connected_slaves:(\d+)/m.exec(String(info));
    return match === null ? 0 : Number(match[1]);
  }
}

/**
 * The replicas a primary's CLUSTER NODES reply lists for it (the `myself` line's id as their
 * primary), whatever their flags say of their health. 0 when the node answering is not a primary.
 */
export function clusterReplicasOf(nodes: string): number {
  const lines = nodes.split('\n').map((line) => line.trim().split(' '));
  const self = lines.find((fields) => (fields[2] ?? '').split(',').includes('myself'));
  if (self === undefined || !self[2]!.split(',').includes('master')) return 0;
  let replicas = 0;
  for (const [, , flags = '', primaryId] of lines) {
    const set = flags.split(',');
    if (primaryId === self[0] && (set.includes('slave') || set.includes('replica'))) replicas++;
  }
  return replicas;
}
