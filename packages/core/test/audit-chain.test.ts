import { expect } from 'chai';
import fc from 'fast-check';
import {
  auditHashPrefix,
  auditLinkHash,
  auditRecord,
  canonicalJson,
  ChainVerifier,
  entryHash,
  GENESIS_HASH,
  linkAuditEntry,
  recordHash,
  type AuditEntry,
  type AuditRecord,
  type ChainedAuditEntry,
  type ChainRecord,
} from '@cos/core';

const ORG = '0b7e4f1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b';
const KEY = '7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d';

const rolled: AuditEntry & { roll: { toKeyId: string; gracePeriodSeconds: number } } = {
  id: '3f0c2a8e-5b1d-4c7e-9a2f-6d8e0b1c2d3e',
  kind: 'api_key_rolled',
  occurredAt: new Date('2026-06-10T12:34:56.789Z'),
  organisationId: ORG,
  keyId: KEY,
  keyPrefix: 'svc_live_Ab3',
  actor: { type: 'operator', name: 'alice' },
  roll: { toKeyId: '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f', gracePeriodSeconds: 3600 },
};
const exposed: AuditEntry = {
  id: '5e4d3c2b-1a0f-4e9d-8c7b-6a5f4e3d2c1b',
  kind: 'api_key_exposed',
  occurredAt: new Date('2026-06-10T12:35:00.000Z'),
  organisationId: ORG,
  keyId: KEY,
  keyPrefix: 'svc_live_Ab3',
  actor: { type: 'secret_scanning' },
  exposure: { type: 'cos_api_key', url: null, source: null },
};
const updated: AuditEntry = {
  id: '6f5e4d3c-2b1a-4f0e-9d8c-7b6a5f4e3d2c',
  kind: 'organisation_updated',
  occurredAt: new Date('2026-06-10T12:36:00.000Z'),
  organisationId: ORG,
  keyId: null,
  keyPrefix: null,
  actor: { type: 'operator' },
};

/** A chain of `n` entries of one organisation. */
function chainOf(n: number, org = ORG): ChainedAuditEntry[] {
  const out: ChainedAuditEntry[] = [];
  for (let i = 0; i < n; i++) {
    const base = [rolled, exposed, updated][i % 3]!;
    const id = `${String(i).padStart(8, '0')}-0000-4000-8000-000000000000`;
    out.push(linkAuditEntry({ ...base, id, organisationId: org, occurredAt: new Date(Date.UTC(2026, 5, 10, 0, 0, i)) }, out[i - 1] ?? null));
  }
  return out;
}

const records = (chain: readonly ChainedAuditEntry[]): AuditRecord[] => chain.map(auditRecord);

function verify(rs: readonly object[], checkpoint: { seq: number; hash: string } | null = null) {
  const v = new ChainVerifier(ORG, checkpoint);
  for (const r of rs) v.push(r as ChainRecord);
  return v.finish();
}

/** Recomputes every hash from the first record on, as an attacker who rewrites the chain would. */
function rehash(rs: AuditRecord[]): AuditRecord[] {
  let prev = GENESIS_HASH;
  return rs.map((r, i) => {
    const next = { ...r, seq: i + 1, prev_hash: prev, hash: '' };
    next.hash = recordHash(next as unknown as Record<string, unknown>);
    prev = next.hash;
    return next;
  });
}

describe('audit chain: canonical encoding and hash (C-63)', () => {
  it('C-63: a fixed, hand-checked vector: the canonical JSON of three linked entries and their SHA-256 (checked with sha256sum)', () => {
    const one = linkAuditEntry(rolled, null);
    const two = linkAuditEntry(exposed, one);
    const three = linkAuditEntry(updated, two);
    const { hash: _h, ...unhashedOne } = auditRecord(one);
    expect(canonicalJson(unhashedOne)).to.equal(
      '{"actor":{"name":"alice","type":"operator"},"detail":{"roll":{"grace_period_seconds":3600,"to_key_id":"9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"}},' +
        '"id":"3f0c2a8e-5b1d-4c7e-9a2f-6d8e0b1c2d3e","key_id":"7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d","key_prefix":"svc_live_Ab3","kind":"api_key_rolled",' +
        '"occurred_at":"2026-06-10T12:34:56.789Z","organisation_id":"0b7e4f1a-2c3d-4e5f-8a9b-0c1d2e3f4a5b","prev_hash":"' +
        GENESIS_HASH +
        '","seq":1}',
    );
    expect(one).to.include({ seq: 1, prevHash: GENESIS_HASH, hash: '6008dded156f571677a02387092364d3f5e08349c691c6338f0afccc2411264d' });
    // null members (the exposure's url and source) are left out.
    expect(two).to.include({ seq: 2, prevHash: one.hash, hash: '882ec2f36e652ca44a50633416d86864c19239ad1c7ee4589057b0aca84a4083' });
    // null key fields are left out; an entry without detail has "detail":{}.
    expect(three).to.include({ seq: 3, prevHash: two.hash, hash: '464ada82ced5f612099750556379f2d623bfdd465dd7d40a18e8aa2994123faa' });
    for (const e of [one, two, three]) expect(entryHash(e)).to.equal(e.hash);
  });

  it('C-63: the public record: organisation_id, seq, prev_hash, hash, actor in snake_case, every kind-specific field under detail', () => {
    const rec = auditRecord(linkAuditEntry(rolled, null));
    expect(Object.keys(rec).sort()).to.deep.equal(
      ['actor', 'detail', 'hash', 'id', 'key_id', 'key_prefix', 'kind', 'occurred_at', 'organisation_id', 'prev_hash', 'seq'].sort(),
    );
    expect(rec.detail).to.deep.equal({ roll: { to_key_id: '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f', grace_period_seconds: 3600 } });
    expect(auditRecord(linkAuditEntry({ ...updated, actor: { type: 'api_key', keyId: KEY } }, null)).actor).to.deep.equal({ type: 'api_key', key_id: KEY });
  });

  it('C-63: every field is covered, including a field a future kind adds; a null field added later changes no hash', () => {
    const base = linkAuditEntry(rolled, null);
    const variants: Array<Partial<ChainedAuditEntry> & Record<string, unknown>> = [
      { id: '3f0c2a8e-5b1d-4c7e-9a2f-6d8e0b1c2d3f' },
      { kind: 'api_key_revoked' },
      { occurredAt: new Date(rolled.occurredAt.getTime() + 1) },
      { organisationId: '0b7e4f1a-2c3d-4e5f-8a9b-0c1d2e3f4a5c' },
      { keyId: null },
      { keyPrefix: 'svc_live_Ab4' },
      { actor: { type: 'operator', name: 'alicf' } },
      { actor: { type: 'operator' } },
      { roll: { toKeyId: rolled.roll.toKeyId, gracePeriodSeconds: 3601 } },
      { seq: 2 },
      { prevHash: '1'.repeat(64) },
      { webhook: { origin: 'https://hooks.example.com' } },
    ];
    for (const v of variants) expect(entryHash({ ...base, ...v } as ChainedAuditEntry), JSON.stringify(v)).to.not.equal(base.hash);
    expect(entryHash({ ...base, laterColumn: null } as unknown as ChainedAuditEntry)).to.equal(base.hash);
    expect(recordHash({ ...auditRecord(base), extra: null })).to.equal(base.hash);
    const unkeyed = linkAuditEntry(updated, null);
    expect(recordHash({ ...auditRecord(unkeyed), key_id: null, key_prefix: null })).to.equal(unkeyed.hash);
  });

  it('C-63: the append path\'s written-out encoding (auditHashPrefix + auditLinkHash) hashes exactly as the generic record encoding, for any entry', () => {
    const text = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('é\n"', '\u2028\u0000', '😀\\'));
    const id = fc.uuid();
    const actor = fc.oneof(
      id.map((keyId) => ({ type: 'api_key' as const, keyId })),
      fc.constant({ type: 'operator' as const }),
      text.map((name) => ({ type: 'operator' as const, name })),
      fc.constant({ type: 'secret_scanning' as const }),
    );
    const extra = fc.record(
      {
        roll: fc.record({ toKeyId: id, gracePeriodSeconds: fc.nat() }),
        exposure: fc.record({ type: text, url: fc.option(text), source: fc.option(text) }),
        member: fc.record({ id }),
        descendantKeyIds: fc.array(id, { maxLength: 3 }),
        laterColumn: fc.constant(null),
        futureField: fc.record({ nestedName: text, at: fc.date({ noInvalidDate: true }) }),
      },
      { requiredKeys: [] },
    );
    const entry = fc
      .tuple(id, fc.constantFrom('api_key_issued', 'api_key_revoked', 'api_key_rolled', 'member_added'), fc.date({ noInvalidDate: true }), id, fc.option(id), fc.option(text), actor, extra)
      .map(([entryId, kind, occurredAt, organisationId, keyId, keyPrefix, who, more]) => ({ id: entryId, kind, occurredAt, organisationId, keyId, keyPrefix, actor: who, ...more }) as unknown as AuditEntry);
    const head = fc.option(fc.record({ seq: fc.integer({ min: 1, max: 2 ** 40 }), hash: fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')) }));
    fc.assert(
      fc.property(entry, head, (e, h) => {
        const linked = linkAuditEntry(e, h);
        expect(linked.hash).to.equal(recordHash(auditRecord(linked)));
        expect(auditLinkHash(auditHashPrefix(e), linked.prevHash, linked.seq)).to.equal(linked.hash);
      }),
      { numRuns: 100 },
    );
  });

  it('C-63: canonical JSON sorts members at every depth, keeps arrays in order, escapes as JSON does, refuses non-integers', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { y: null, x: 'é\n"' }], c: true }, n: null })).to.equal('{"a":{"c":true,"d":[3,{"x":"é\\n\\""}]},"b":1}');
    expect(() => canonicalJson({ a: 1.5 })).to.throw(TypeError);
    expect(() => canonicalJson({ a: 2 ** 53 })).to.throw(TypeError);
  });
});

describe('audit chain: verification (C-63)', () => {
  it('C-63: an untouched chain verifies ok, with its head', () => {
    const chain = chainOf(10);
    expect(verify(records(chain))).to.deep.include({ status: 'ok', entries: 10, head: { seq: 10, hash: chain[9]!.hash }, first_seq: 1 });
    expect(verify([])).to.deep.include({ status: 'ok', entries: 0, head: { seq: 0, hash: GENESIS_HASH } });
  });

  it('C-63: a changed detail is "entry_changed" at its seq', () => {
    const rs = records(chainOf(10));
    rs[4] = { ...rs[4]!, detail: { roll: { to_key_id: 'x', grace_period_seconds: 0 } } };
    expect(verify(rs).broken).to.include({ seq: 5, reason: 'entry_changed' });
  });

  it('C-63: an entry replaced with a recomputed hash is found at its seq (the next entry names the old one)', () => {
    const rs = records(chainOf(10));
    const forged = { ...rs[4]!, kind: 'organisation_created', hash: '' };
    forged.hash = recordHash(forged as unknown as Record<string, unknown>);
    rs[4] = forged;
    expect(verify(rs).broken).to.include({ seq: 5, reason: 'entry_changed' });
  });

  it('C-63: a deleted entry is "entry_missing" at its seq, with or without the later seqs renumbered', () => {
    const rs = records(chainOf(10));
    expect(verify([...rs.slice(0, 3), ...rs.slice(4)]).broken).to.include({ seq: 4, reason: 'entry_missing' });
    const renumbered = [...rs.slice(0, 3), ...rs.slice(4).map((r) => ({ ...r, seq: r.seq - 1 }))];
    expect(verify(renumbered).broken).to.include({ seq: 4, reason: 'entry_missing' });
  });

  it('C-63: two swapped entries are "entries_reordered" at the first of them', () => {
    const rs = records(chainOf(10));
    const swapped = [...rs];
    swapped[5] = { ...rs[6]!, seq: 6 };
    swapped[6] = { ...rs[5]!, seq: 7 };
    expect(verify(swapped).broken).to.include({ seq: 6, reason: 'entries_reordered' });
    const far = [...rs];
    far[2] = { ...rs[7]!, seq: 3 };
    far[7] = { ...rs[2]!, seq: 8 };
    expect(verify(far).broken).to.include({ seq: 3, reason: 'entries_reordered' });
  });

  it('C-63: an inserted entry (hash recomputed, later seqs shifted) is "entry_inserted" at its seq; a seq twice likewise', () => {
    const rs = records(chainOf(10));
    const forged = { ...rs[3]!, id: 'a0000000-0000-4000-8000-000000000000', seq: 4, prev_hash: rs[2]!.hash, hash: '' };
    forged.hash = recordHash(forged as unknown as Record<string, unknown>);
    const inserted = [...rs.slice(0, 3), forged, ...rs.slice(3).map((r) => ({ ...r, seq: r.seq + 1 }))];
    expect(verify(inserted).broken).to.include({ seq: 4, reason: 'entry_inserted' });
    expect(verify([...rs.slice(0, 4), rs[3]!, ...rs.slice(4)]).broken).to.include({ seq: 4, reason: 'entry_inserted' });
  });

  it('C-63: a checkpoint: the chain extends it; truncated after it, or rewritten with recomputed hashes, it fails', () => {
    const rs = records(chainOf(10));
    const cp = { seq: 6, hash: rs[5]!.hash };
    expect(verify(rs, cp)).to.include({ status: 'ok', checkpoint: 'extends' });
    // Chain-wise the truncated and the rewritten logs are sound: only the checkpoint finds them.
    const truncated = rehash([...rs.slice(0, 2), ...rs.slice(3, 5)]);
    expect(verify(truncated).status).to.equal('ok');
    expect(verify(truncated, cp).broken).to.include({ seq: 5, reason: 'checkpoint_truncated' });
    const rewritten = rehash(rs.map((r, i) => (i === 1 ? { ...r, actor: { type: 'operator', name: 'mallory' } } : r)));
    expect(verify(rewritten).status).to.equal('ok');
    expect(verify(rewritten, cp).broken).to.include({ seq: 6, reason: 'checkpoint_rewritten' });
    // Entries rewritten after the checkpoint are beyond what it can prove.
    expect(verify([...rs.slice(0, 6), ...rehash(rs).slice(6)], cp).status).to.equal('ok');
  });

  it('C-120: rows outside the chain, as the store counted them, break a chain that holds (at seq 0, naming the first), also under a checkpoint; an earlier break stays the one reported', () => {
    const rs = records(chainOf(5));
    const finish = (list: readonly object[], outside: { entries: number; firstId: string }, checkpoint: { seq: number; hash: string } | null = null) => {
      const v = new ChainVerifier(ORG, checkpoint);
      for (const r of list) v.push(r as ChainRecord);
      return v.finish(outside);
    };
    const one = finish(rs, { entries: 1, firstId: 'forged-id' });
    expect(one).to.deep.include({ status: 'broken', entries: 5, head: { seq: 5, hash: rs[4]!.hash } });
    expect(one.broken).to.deep.equal({
      seq: 0,
      reason: 'entry_outside_chain',
      message: '1 row is outside the chain (seq missing, 0 or negative; first id forged-id): rows the service never writes were inserted',
    });
    expect(finish(rs, { entries: 3, firstId: 'x' }).broken?.message).to.match(/^3 rows are outside the chain/);
    expect(finish(rs, { entries: 1, firstId: 'x' }, { seq: 3, hash: rs[2]!.hash }).broken).to.include({ seq: 0, reason: 'entry_outside_chain' });
    expect(finish([], { entries: 1, firstId: 'x' }).broken, 'an organisation with no chain at all').to.include({ reason: 'entry_outside_chain' });
    expect(finish(rs, { entries: 0, firstId: '' }).status).to.equal('ok');
    const changed = rs.map((r, i) => (i === 2 ? { ...r, key_prefix: 'svc_live_Zzz' } : r));
    expect(finish(changed, { entries: 1, firstId: 'x' }).broken).to.include({ seq: 3, reason: 'entry_changed' });
  });

  it('C-63: an export that starts later is anchored on its first record', () => {
    const rs = records(chainOf(10));
    const v = new ChainVerifier(ORG, null, { seq: 4, prevHash: rs[3]!.prev_hash });
    for (const r of rs.slice(3)) v.push(r as ChainRecord);
    expect(v.finish()).to.deep.include({ status: 'ok', entries: 7, first_seq: 4 });
  });
});
