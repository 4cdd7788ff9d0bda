/**
 * The instance registry in memory (the InstanceRegistry port): for one process, or several sharing
 * this object. Ages are measured by `now` (epoch ms; default the wall clock), the registry's own clock.
 */
import { REGISTRY_PRUNE_AFTER_MS, type InstanceRecord, type InstanceRegistration, type InstanceRegistry } from '../ports/instance-registry.js';

interface Row {
  readonly role: 'cache' | 'writer';
  readonly redisLocation: string;
  readonly redisAuth: boolean;
  readonly redisIdentity: string | null;
  readonly startedAt: number;
  readonly heartbeatAt: number;
}

export class InMemoryInstanceRegistry implements InstanceRegistry {
  readonly #rows = new Map<string, Row>();

  constructor(private readonly now: () => number = () => Date.now()) {}

  async heartbeat(registration: InstanceRegistration): Promise<void> {
    const t = this.now();
    const before = this.#rows.get(registration.instanceId);
    this.#rows.set(registration.instanceId, {
      role: before?.role ?? 'cache',
      redisLocation: registration.redisLocation,
      redisAuth: registration.redisAuth,
      redisIdentity: registration.redisIdentity ?? before?.redisIdentity ?? null,
      startedAt: before?.startedAt ?? t,
      heartbeatAt: t,
    });
  }

  async beginWrite(writeId: string): Promise<void> {
    if (this.#rows.has(writeId)) throw new Error(`instance registry: ${writeId} is recorded already`);
    const t = this.now();
    this.#rows.set(writeId, { role: 'writer', redisLocation: '', redisAuth: false, redisIdentity: null, startedAt: t, heartbeatAt: t });
  }

  async endWrite(writeId: string): Promise<void> {
    if (this.#rows.get(writeId)?.role === 'writer') this.#rows.delete(writeId);
  }

  async writesInFlight(liveMs: number): Promise<number> {
    const t = this.now();
    return [...this.#rows.values()].filter((r) => r.role === 'writer' && r.heartbeatAt > t - Math.floor(liveMs)).length;
  }

  async prune(olderThanMs: number = REGISTRY_PRUNE_AFTER_MS): Promise<void> {
    const t = this.now();
    for (const [id, r] of this.#rows) if (r.heartbeatAt < t - Math.floor(olderThanMs)) this.#rows.delete(id);
  }

  async remove(instanceId: string): Promise<void> {
    if (this.#rows.get(instanceId)?.role === 'cache') this.#rows.delete(instanceId);
  }

  async live(liveMs: number): Promise<InstanceRecord[]> {
    const t = this.now();
    return [...this.#rows.entries()]
      .filter(([, r]) => r.role === 'cache' && r.heartbeatAt > t - Math.floor(liveMs))
      .sort(([ia, a], [ib, b]) => a.startedAt - b.startedAt || (ia < ib ? -1 : ia > ib ? 1 : 0))
      .map(([instanceId, r]) => ({
        instanceId,
        redisLocation: r.redisLocation,
        redisAuth: r.redisAuth,
        redisIdentity: r.redisIdentity,
        startedAt: r.startedAt,
        heartbeatAt: r.heartbeatAt,
        ageMs: t - r.heartbeatAt,
      }));
  }
}
