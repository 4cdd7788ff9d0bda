import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { cryptoRandom, digestKey, generateRawKey, keyPrefixOf } from '@cos/core';
import { createSqlStore } from '@cos/store-sql';
const dir = mkdtempSync(join(tmpdir(), 'cos-micro-'));
const s = createSqlStore({ databaseUrl: `sqlite:${join(dir, 'm.sqlite')}` });
try {
  await s.migrate();
  const now = new Date();
  const org = { id: randomUUID(), name: 'A', slug: 'a', industrySection: null, isSystem: false, createdAt: now, updatedAt: now };
  await s.stores.organisations.create(org);
  const digests: string[] = [];
  for (let i = 0; i < 1000; i++) { const raw = generateRawKey('live', cryptoRandom); digests.push(digestKey(raw)); await s.stores.apiKeys.insert({ id: randomUUID(), organisationId: org.id, label: 'x', keyPrefix: keyPrefixOf(raw), digest: digestKey(raw), expiresAt: null, createdAt: now, revokedAt: null }); }
  const N = 100_000;
  for (let round = 0; round < 3; round++) {
    let t = performance.now();
    for (let i = 0; i < N; i++) if ((await s.stores.apiKeys.findCredential(digests[i % 1000]!)) === null) throw new Error('missing');
    const cred = (performance.now() - t) / N;
    t = performance.now();
    for (let i = 0; i < N; i++) if ((await s.stores.organisations.findById(org.id)) === null) throw new Error('missing');
    const byId = (performance.now() - t) / N;
    console.log(`round ${round}: findCredential ${(cred * 1000).toFixed(2)} µs/call, organisations.findById ${(byId * 1000).toFixed(2)} µs/call (${N} sequential awaited calls each)`);
  }
} finally {
  await s.close();
  rmSync(dir, { recursive: true, force: true });
}
