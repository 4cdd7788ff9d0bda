/**
 * KeyUsage (last_used_at in batches) with a FakeClock. The rule: a key's first use, or its first
 * use more than interval - margin after the use last written for it, is written at once; later
 * uses wait until interval - margin after that write, riding along with it. So no use waits more
 * than interval - margin, and the stored value is never more than the interval behind the last use,
 * whatever the history (a long quiet period included). One recordUses call per flush, at most one
 * flush per minGapMs, a failed flush kept and retried with a throttled warning, never an error to
 * the caller; stop() writes what is left.
 */
import { expect } from 'chai';
import { KeyUsage, KEY_USAGE_WARN_INTERVAL_MS, type KeyUse, type UsageCount } from '@cos/core';
import { CapturingLogger, FakeClock } from '@cos/core/testing';

const MINUTE = 60_000;

/** Both stores KeyUsage writes to: last uses (ApiKeyStore.recordUses) and counts (UsageStore.add). */
class RecordingKeys {
  readonly batches: KeyUse[][] = [];
  readonly countBatches: UsageCount[][] = [];
  failing = false;
  countsFailing = false;
  async recordUses(uses: readonly KeyUse[]): Promise<void> {
    if (this.failing) throw new Error('database unavailable');
    this.batches.push([...uses]);
  }
  async add(counts: readonly UsageCount[]): Promise<void> {
    if (this.failing || this.countsFailing) throw new Error('database unavailable');
    this.countBatches.push([...counts]);
  }
  /** What a store adding every batch holds: `${keyId} ${hour ISO}` -> [requests, rateLimited]. */
  counted(): Record<string, [number, number]> {
    const sums: Record<string, [number, number]> = {};
    for (const b of this.countBatches) {
      for (const c of b) {
        const id = `${c.keyId} ${c.hourStart.toISOString()}`;
        const [r, l] = sums[id] ?? [0, 0];
        sums[id] = [r + c.requests, l + c.rateLimited];
      }
    }
    return sums;
  }
  /** What a store keeping the latest time per key holds. */
  stored(keyId: string): number | undefined {
    let latest: number | undefined;
    for (const b of this.batches) for (const u of b) if (u.keyId === keyId && (latest === undefined || u.at.getTime() > latest)) latest = u.at.getTime();
    return latest;
  }
}

describe('core: KeyUsage (last_used_at in batches)', () => {
  let clock: FakeClock;
  let keys: RecordingKeys;
  let logger: CapturingLogger;
  let usage: KeyUsage;
  beforeEach(() => {
    clock = new FakeClock();
    keys = new RecordingKeys();
    logger = new CapturingLogger();
    usage = new KeyUsage({ apiKeys: keys, usage: keys, clock, logger });
  });
  afterEach(() => usage.stop());

  const rows = (b: KeyUse[] | undefined): [string, number][] => (b ?? []).map((u) => [u.keyId, u.at.getTime()]);
  /** One use of `keyId` now, then whatever flush it started (record() never waits). */
  const use = async (keyId: string): Promise<number> => {
    const now = clock.now().getTime();
    usage.record(keyId, new Date(now));
    await usage.flushIfDue();
    return now;
  };

  it('the margin and gap for the default interval: due 55 s after the last write, flushes at most once a second', () => {
    expect(usage.flushIntervalMs).to.equal(MINUTE);
    expect(usage.marginMs).to.equal(5_000);
    expect(usage.minGapMs).to.equal(1_000);
  });

  it('the first use of a key is written at once; later uses wait until interval - margin after that write, keeping the latest', async () => {
    const t0 = await use('a');
    expect(rows(keys.batches[0])).to.deep.equal([['a', t0]]);
    clock.advance(1_000);
    await use('a');
    clock.advance(1_000);
    const latest = await use('a');
    clock.advance(MINUTE - 5_000 - 2_000 - 1);
    await usage.flushIfDue();
    expect(keys.batches).to.have.length(1);
    expect(usage.pendingKeys).to.equal(1);
    clock.advance(1);
    await usage.flushIfDue();
    expect(keys.batches).to.have.length(2);
    expect(rows(keys.batches[1])).to.deep.equal([['a', latest]]);
    expect(usage.pendingKeys).to.equal(0);
  });

  it('a use after a quiet period longer than interval - margin is written at once (used 15:38:09, written; used again 15:39:15: written at 15:39:15)', async () => {
    /** The quiet time passes as with start()'s timer: a flushIfDue every second. */
    const quietUntil = async (iso: string): Promise<void> => {
      while (clock.now().getTime() < Date.parse(iso)) {
        clock.advance(1_000);
        await usage.flushIfDue();
      }
    };
    clock.set(new Date('2026-11-25T15:38:09Z'));
    await use('a');
    expect(keys.batches).to.have.length(1);
    await quietUntil('2026-11-25T15:39:15Z');
    const second = await use('a');
    expect(keys.batches).to.have.length(2);
    expect(rows(keys.batches[1])).to.deep.equal([['a', second]]);
    // After a long quiet period the same: the error does not grow with the silence.
    await quietUntil('2026-11-25T17:39:15Z');
    const third = await use('a');
    expect(rows(keys.batches[2])).to.deep.equal([['a', third]]);
  });

  it('whatever the pattern of uses (bursts, quiet spells, steady use), each use is written within interval - margin + minGapMs and the stored value is never more than interval - margin behind a use minGapMs old', async () => {
    // A deterministic pseudo-random schedule of uses of three keys over two hours, advancing the
    // clock in steps of 250 ms as the timer would (flushIfDue at every step).
    let seed = 12345;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const uses = new Map<string, number[]>();
    const unwritten = new Map<string, number>(); // key -> earliest use not yet covered by a write
    const start = clock.now().getTime();
    let maxBehind = 0;
    let maxWait = 0;
    while (clock.now().getTime() - start < 2 * 3_600_000) {
      const now = clock.now().getTime();
      // Bursts, quiet spells of up to 5 minutes, and steady traffic.
      for (const key of ['steady', 'bursty', 'rare']) {
        const p = key === 'steady' ? 0.5 : key === 'bursty' ? (Math.floor(now / 90_000) % 3 === 0 ? 0.8 : 0) : 0.002;
        if (random() < p) {
          usage.record(key, new Date(now));
          uses.set(key, [...(uses.get(key) ?? []), now]);
          if (!unwritten.has(key)) unwritten.set(key, now);
        }
      }
      await usage.flushIfDue();
      for (const [key, times] of uses) {
        const stored = keys.stored(key) ?? Number.NEGATIVE_INFINITY;
        if (stored >= (unwritten.get(key) ?? Number.POSITIVE_INFINITY)) unwritten.delete(key);
        // The latest use at least minGapMs old: a due flush may wait that long for the previous one.
        while (times.length > 1 && times[1]! <= now - usage.minGapMs) times.shift();
        const settled = times[0]! <= now - usage.minGapMs ? times[0] : undefined;
        if (settled !== undefined) maxBehind = Math.max(maxBehind, settled - stored);
        const first = unwritten.get(key);
        if (first !== undefined) maxWait = Math.max(maxWait, now - first);
      }
      clock.advance(250);
    }
    expect(maxBehind).to.be.at.most(MINUTE - usage.marginMs);
    expect(maxWait).to.be.at.most(MINUTE - usage.marginMs + usage.minGapMs);
    expect(maxWait).to.be.below(MINUTE);
    // Still batched: about 14,400 uses of the steady key alone, yet one statement per 55 s plus one
    // per burst or rare use that found no recent write (about 130 + 27 + 15).
    expect(keys.batches.length).to.be.within(130, 200);
  });

  it('batched: one statement carries every pending key, and flushes start at most once per minGapMs', async () => {
    const t0 = await use('a'); // written at once
    clock.advance(10_000);
    const a2 = await use('a'); // pending, due at t0 + 55 s
    expect(keys.batches).to.have.length(1);
    const b1 = await use('b'); // a first use: due at once, and a rides along
    expect(rows(keys.batches[1])).to.deep.equal([['a', a2], ['b', b1]]);
    clock.advance(usage.minGapMs - 1);
    const c1 = await use('c'); // due, but a flush started less than minGapMs ago
    expect(keys.batches).to.have.length(2);
    clock.advance(1);
    await usage.flushIfDue();
    expect(rows(keys.batches[2])).to.deep.equal([['c', c1]]);
    expect(t0).to.be.below(a2);
  });

  it('a key used all the time is written about once per interval - margin (one write at first use, then every 55 s)', async () => {
    for (let s = 0; s < 180; s++) {
      await use('busy');
      clock.advance(1_000);
    }
    // At 0, 55, 110 and 165 s.
    expect(keys.batches).to.have.length(4);
    for (const b of keys.batches) expect(b).to.have.length(1);
  });

  it('a failed flush fails nothing: the uses are kept (a later use wins), retried after the margin, warned about at most once a minute', async () => {
    keys.failing = true;
    await use('a');
    expect(usage.pendingKeys).to.equal(1);
    const warnings = (): number => logger.entries.filter((e) => e.level === 'warn').length;
    expect(warnings()).to.equal(1);
    expect(logger.entries[0]!.message).to.match(/last_used_at flush failed/);
    clock.advance(usage.marginMs - 1);
    await use('a'); // not retried yet
    clock.advance(1);
    await usage.flushIfDue(); // retried: a second failure within the warning interval is not logged
    expect(warnings()).to.equal(1);
    clock.advance(KEY_USAGE_WARN_INTERVAL_MS);
    await usage.flush();
    expect(warnings()).to.equal(2);
    expect(logger.entries.at(-1)!.fields).to.include({ suppressed: 1 });
    keys.failing = false;
    clock.advance(usage.marginMs);
    const lastUse = await use('a');
    expect(keys.batches).to.have.length(1);
    expect(rows(keys.batches[0])).to.deep.equal([['a', lastUse]]);
  });

  it('record() never throws and never waits, even while the store fails', () => {
    keys.failing = true;
    clock.advance(MINUTE);
    expect(() => usage.record('a', clock.now())).to.not.throw();
  });

  it('stop() writes what is left at once (graceful shutdown), and is idempotent', async () => {
    await use('a');
    usage.start();
    usage.record('a', clock.now());
    expect(keys.batches).to.have.length(1);
    await usage.stop();
    expect(keys.batches).to.have.length(2);
    await usage.stop();
    expect(keys.batches).to.have.length(2);
  });

  it('start() flushes on its own once due, without any further use (real timer, clock-decided)', async () => {
    usage = new KeyUsage({ apiKeys: keys, usage: keys, clock, logger, flushIntervalMs: 1_200 });
    await use('quiet');
    usage.record('quiet', clock.now());
    usage.start();
    expect(keys.batches).to.have.length(1);
    clock.advance(1_200 - usage.marginMs);
    await new Promise((resolve) => setTimeout(resolve, 20 * usage.minGapMs));
    expect(keys.batches).to.have.length(2);
  });

  describe('usage counts per key and hour (requests answered, refused with 429)', () => {
    const request = async (keyId: string, outcome: 'answered' | 'rate_limited'): Promise<void> => {
      usage.record(keyId, clock.now(), outcome);
      await usage.flushIfDue();
    };

    it('counts ride along with the uses: one add per flush carrying every key, nothing written per request', async () => {
      clock.set(new Date('2026-11-25T15:10:00.000Z'));
      await request('a', 'answered'); // a first use: written at once, with its count
      expect(keys.counted()).to.deep.equal({ 'a 2026-11-25T15:00:00.000Z': [1, 0] });
      for (let i = 0; i < 50; i++) {
        clock.advance(100);
        await request('a', i % 10 === 0 ? 'rate_limited' : 'answered');
        await request('b', 'answered');
      }
      expect(keys.countBatches, 'b rode along with nothing new of a: a waits for its interval').to.have.length(2);
      clock.advance(MINUTE);
      await usage.flushIfDue();
      expect(keys.countBatches).to.have.length(3);
      expect(keys.countBatches.length).to.equal(keys.batches.length);
      expect(keys.counted()).to.deep.equal({ 'a 2026-11-25T15:00:00.000Z': [46, 5], 'b 2026-11-25T15:00:00.000Z': [50, 0] });
      expect(usage.pendingKeys).to.equal(0);
    });

    it('an hour boundary between two flushes gives two rows for the key; a record() without an outcome notes the use only', async () => {
      clock.set(new Date('2026-11-25T15:59:59.000Z'));
      await request('a', 'answered');
      clock.advance(500);
      await request('a', 'rate_limited');
      usage.record('a', clock.now());
      clock.advance(1_000); // 16:00:00.500
      await request('a', 'answered');
      await request('a', 'answered');
      usage.record('a', new Date('2026-11-25T15:59:59.900Z'), 'answered'); // a request that started before the hour
      await usage.stop();
      expect(keys.counted()).to.deep.equal({
        'a 2026-11-25T15:00:00.000Z': [2, 1],
        'a 2026-11-25T16:00:00.000Z': [2, 0],
      });
    });

    it('counts whose write failed are kept and added once at a later flush; counts written are never written again', async () => {
      clock.set(new Date('2026-11-25T15:10:00.000Z'));
      keys.countsFailing = true;
      await request('a', 'answered');
      expect(keys.batches, 'the use was written').to.have.length(1);
      expect(logger.entries.at(-1)!.message).to.match(/usage counts flush failed/);
      await request('a', 'rate_limited');
      keys.countsFailing = false;
      clock.advance(usage.marginMs);
      await usage.flushIfDue();
      expect(keys.counted()).to.deep.equal({ 'a 2026-11-25T15:00:00.000Z': [1, 1] });
      await request('a', 'answered');
      await usage.stop();
      expect(keys.counted()).to.deep.equal({ 'a 2026-11-25T15:00:00.000Z': [2, 1] });
    });

    it('a whole flush failing keeps both the use and the counts; the retry writes each once', async () => {
      clock.set(new Date('2026-11-25T15:10:00.000Z'));
      keys.failing = true;
      await request('a', 'answered');
      await request('a', 'answered');
      keys.failing = false;
      clock.advance(usage.marginMs);
      await usage.flushIfDue();
      expect(rows(keys.batches[0])).to.deep.equal([['a', Date.parse('2026-11-25T15:10:00.000Z')]]);
      expect(keys.counted()).to.deep.equal({ 'a 2026-11-25T15:00:00.000Z': [2, 0] });
    });
  });
});
