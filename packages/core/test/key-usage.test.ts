/**
 * KeyUsage (issue 16, last_used_at) with a FakeClock: uses kept in memory, at most one flush per
 * interval, one recordUses call per flush, a failed flush kept and retried with a throttled warning,
 * never an error to the caller; stop() writes what is left.
 */
import { expect } from 'chai';
import { KeyUsage, KEY_USAGE_WARN_INTERVAL_MS, type KeyUse } from '@cos/core';
import { CapturingLogger, FakeClock } from '@cos/core/testing';

const MINUTE = 60_000;

class RecordingKeys {
  readonly batches: KeyUse[][] = [];
  failing = false;
  async recordUses(uses: readonly KeyUse[]): Promise<void> {
    if (this.failing) throw new Error('database unavailable');
    this.batches.push([...uses]);
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
    usage = new KeyUsage({ apiKeys: keys, clock, logger });
  });
  afterEach(() => usage.stop());

  const at = (ms: number): Date => new Date(clock.now().getTime() + ms);

  it('keeps the latest use of each key and writes nothing before the interval has passed', async () => {
    usage.record('a', at(0));
    usage.record('a', at(2_000));
    usage.record('a', at(1_000));
    usage.record('b', at(500));
    clock.advance(MINUTE - 1);
    await usage.flushIfDue();
    expect(keys.batches).to.deep.equal([]);
    expect(usage.pendingKeys).to.equal(2);
    clock.advance(1);
    await usage.flushIfDue();
    expect(keys.batches).to.have.length(1);
    expect(keys.batches[0]!.map((u) => [u.keyId, u.at.getTime()])).to.deep.equal([
      ['a', at(2_000 - MINUTE).getTime()],
      ['b', at(500 - MINUTE).getTime()],
    ]);
    expect(usage.pendingKeys).to.equal(0);
  });

  it('at most one flush per interval: a key used all the time is written once a minute', async () => {
    for (let s = 0; s < 180; s++) {
      usage.record('busy', clock.now());
      await usage.flushIfDue();
      clock.advance(1_000);
    }
    expect(keys.batches.length).to.be.within(2, 3);
    for (const b of keys.batches) expect(b).to.have.length(1);
  });

  it('a failed flush fails nothing: the uses are kept (a later use wins), retried at the next interval, warned about at most once a minute', async () => {
    keys.failing = true;
    usage.record('a', at(0));
    clock.advance(MINUTE);
    await usage.flushIfDue();
    usage.record('a', clock.now());
    expect(usage.pendingKeys).to.equal(1);
    clock.advance(MINUTE / 2);
    await usage.flush(); // a second failure within the warning interval: not logged
    const warnings = (): number => logger.entries.filter((e) => e.level === 'warn').length;
    expect(warnings()).to.equal(1);
    expect(logger.entries[0]!.message).to.match(/last_used_at flush failed/);
    clock.advance(KEY_USAGE_WARN_INTERVAL_MS);
    await usage.flush();
    expect(warnings()).to.equal(2);
    expect(logger.entries.at(-1)!.fields).to.include({ suppressed: 1 });
    keys.failing = false;
    const lastUse = clock.now();
    usage.record('a', lastUse);
    clock.advance(MINUTE);
    await usage.flushIfDue();
    expect(keys.batches).to.have.length(1);
    expect(keys.batches[0]!.map((u) => [u.keyId, u.at.getTime()])).to.deep.equal([['a', lastUse.getTime()]]);
  });

  it('record() never throws and never waits, even while the store fails', () => {
    keys.failing = true;
    clock.advance(MINUTE);
    expect(() => usage.record('a', clock.now())).to.not.throw();
  });

  it('stop() writes what is left at once (graceful shutdown), and is idempotent', async () => {
    usage.start();
    usage.record('a', clock.now());
    await usage.stop();
    expect(keys.batches).to.have.length(1);
    await usage.stop();
    expect(keys.batches).to.have.length(1);
  });

  it('start() flushes on its own once due, without any further use (real timer, clock-decided)', async () => {
    usage = new KeyUsage({ apiKeys: keys, clock, logger, flushIntervalMs: 50 });
    usage.record('quiet', clock.now());
    usage.start();
    clock.advance(50);
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(keys.batches).to.have.length(1);
  });
});
